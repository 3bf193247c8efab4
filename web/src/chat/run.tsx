// The answer in flight: one run per tab, streamed from POST /v1/chat, kept in sessionStorage
// after every event so a reload resumes it with `Last-Event-ID` (GET /v1/runs/{id}/events).
import { useQueryClient } from "@tanstack/react-query";
import {
  createContext,
  useCallback,
  useContext,
  useEffect,
  useMemo,
  useRef,
  useState,
  type ReactNode,
} from "react";
import { ApiError, request, type Schemas } from "../api/client";
import { keys } from "../api/queries";
import { readEvents, type RunEvent } from "../api/sse";
import { currentPath, navigate } from "../router";

export type Citation = Schemas["CitationEvent"];

export type Phase = "sending" | "streaming" | "reconnecting" | "done" | "failed";

export interface LiveRun {
  runId: string | null;
  conversationId: string | null;
  userMessageId: string | null;
  userText: string;
  agent: string | null;
  lastId: number;
  text: string;
  citations: Citation[];
  toolCalls: Schemas["ToolCallEvent"][];
  steps: Schemas["StepEvent"][];
  phase: Phase;
  done: Schemas["DoneEvent"] | null;
  error: string | null;
}

const STORAGE_KEY = "search2o.run";
const RETRY_MS = [250, 500, 1000, 2000, 4000, 8000];

function load(): LiveRun | null {
  try {
    const raw = window.sessionStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as LiveRun) : null;
  } catch {
    return null;
  }
}

function save(run: LiveRun | null): void {
  try {
    if (run === null) window.sessionStorage.removeItem(STORAGE_KEY);
    else window.sessionStorage.setItem(STORAGE_KEY, JSON.stringify(run));
  } catch {
    // storage full or disabled: the run goes on, it just cannot resume after a reload
  }
}

/** Apply one event to a run (pure). */
export function apply(run: LiveRun, event: RunEvent): LiveRun {
  const next: LiveRun = { ...run, lastId: Number.isFinite(event.id) ? event.id : run.lastId };
  switch (event.kind) {
    case "conversation":
      next.runId = event.data.run_id ?? null;
      next.conversationId = event.data.conversation_id;
      next.userMessageId = event.data.user_message_id;
      next.agent = event.data.agent ?? run.agent;
      next.phase = "streaming";
      break;
    case "tool_call":
      next.toolCalls = [...run.toolCalls, event.data];
      break;
    case "step":
      next.steps = [...run.steps, event.data];
      break;
    case "citation":
      next.citations = [...run.citations.filter((c) => c.number !== event.data.number), event.data];
      break;
    case "delta":
      next.text = run.text + event.data.text;
      break;
    case "done":
      next.done = event.data;
      next.text = event.data.text;
      next.phase = "done";
      break;
    case "error":
      next.error = event.data.message;
      next.phase = "failed";
      break;
  }
  return next;
}

interface RunApi {
  run: LiveRun | null;
  /** Send a message; `page` is the page the user reads, sent as context (the extension). */
  send: (
    message: string,
    conversationId: string | null,
    agent: string | null,
    page?: Schemas["PageContext"] | null,
  ) => Promise<void>;
  stop: () => Promise<void>;
  clear: () => void;
}

const RunContext = createContext<RunApi | null>(null);

export function useRun(): RunApi {
  const value = useContext(RunContext);
  if (!value) throw new Error("useRun outside RunProvider");
  return value;
}

export function RunProvider({ children }: { children: ReactNode }) {
  const [run, setRun] = useState<LiveRun | null>(load);
  const current = useRef<LiveRun | null>(run);
  const queryClient = useQueryClient();

  const update = useCallback((next: LiveRun | null) => {
    current.current = next;
    save(next);
    setRun(next);
  }, []);

  const settle = useCallback(
    (finished: LiveRun) => {
      if (!finished.conversationId) return;
      void queryClient.invalidateQueries({ queryKey: keys.conversation(finished.conversationId) });
      void queryClient.invalidateQueries({ queryKey: keys.waiting(finished.conversationId) });
      void queryClient.invalidateQueries({ queryKey: keys.allConversations });
    },
    [queryClient],
  );

  /** Read a stream to its end; return whether the run reached `done` or `error`. */
  const consume = useCallback(
    async (response: Response): Promise<boolean> => {
      for await (const event of readEvents(response)) {
        const before = current.current;
        if (!before) return true;
        const next = apply(before, event);
        update(next);
        if (event.kind === "conversation" && before.conversationId === null) {
          // A new conversation: its address is known now; a reload comes back to it.
          if (currentPath() === "/") navigate(`/c/${next.conversationId}`, true, { adopted: true });
          void queryClient.invalidateQueries({ queryKey: keys.allConversations });
        }
        if (event.kind === "done" || event.kind === "error") {
          settle(next);
          return true;
        }
      }
      return false;
    },
    [queryClient, settle, update],
  );

  const follow = useCallback(async () => {
    for (let attempt = 0; ; attempt++) {
      const live = current.current;
      if (!live?.runId || live.phase === "done" || live.phase === "failed") return;
      try {
        const response = await request(`/v1/runs/${encodeURIComponent(live.runId)}/events`, {
          headers: { "Last-Event-ID": String(live.lastId), Accept: "text/event-stream" },
        });
        if (current.current) update({ ...current.current, phase: "streaming" });
        if (await consume(response)) return;
      } catch (error) {
        if (error instanceof ApiError && error.status >= 400 && error.status < 500) {
          const gone = current.current;
          if (gone) update({ ...gone, phase: "failed", error: error.message });
          return;
        }
      }
      const waiting = current.current;
      if (!waiting) return;
      update({ ...waiting, phase: "reconnecting" });
      const delay = RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)] ?? 8000;
      await new Promise((resolve) => window.setTimeout(resolve, delay));
    }
  }, [consume, update]);

  const send = useCallback(
    async (
      message: string,
      conversationId: string | null,
      agent: string | null,
      page?: Schemas["PageContext"] | null,
    ) => {
      const fresh: LiveRun = {
        runId: null,
        conversationId,
        userMessageId: null,
        userText: message,
        agent,
        lastId: 0,
        text: "",
        citations: [],
        toolCalls: [],
        steps: [],
        phase: "sending",
        done: null,
        error: null,
      };
      update(fresh);
      try {
        const body: Schemas["ChatRequest"] = { message, stream: true };
        if (conversationId) body.conversation_id = conversationId;
        if (agent) body.agent = agent;
        if (page) body.page = page;
        const response = await request("/v1/chat", {
          method: "POST",
          json: body,
          headers: { Accept: "text/event-stream" },
        });
        if (await consume(response)) return;
      } catch (error) {
        const live = current.current;
        if (!live) return;
        if (error instanceof ApiError || !live.runId) {
          update({ ...live, phase: "failed", error: (error as Error).message });
          return;
        }
      }
      await follow(); // the connection dropped mid-answer: the run goes on; follow it again
    },
    [consume, follow, update],
  );

  const stop = useCallback(async () => {
    const live = current.current;
    if (!live?.runId) return;
    await request(`/v1/runs/${encodeURIComponent(live.runId)}/stop`, { method: "POST" });
  }, []);

  const clear = useCallback(() => update(null), [update]);

  // After a reload: an answer that was still coming is followed from the last event seen.
  const resumed = useRef(false);
  useEffect(() => {
    if (resumed.current) return;
    resumed.current = true;
    const saved = current.current;
    if (saved && saved.runId && (saved.phase === "streaming" || saved.phase === "reconnecting")) {
      void follow();
    } else if (saved && saved.phase === "sending") {
      update(null); // sent before the server named the run: the conversation shows what exists
    }
  }, [follow, update]);

  const value = useMemo(() => ({ run, send, stop, clear }), [run, send, stop, clear]);
  return <RunContext.Provider value={value}>{children}</RunContext.Provider>;
}
