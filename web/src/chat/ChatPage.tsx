// A conversation: its messages, the answer in flight, the composer.
import { useEffect, useRef, useState, type ReactNode } from "react";
import { ApiError, type Schemas } from "../api/client";
import { useConversation, useWaiting } from "../api/queries";
import { Composer } from "./Composer";
import { MessageView, shownOf, type Shown } from "./MessageView";
import { TraceDrawer } from "./TraceDrawer";
import { useRun, type LiveRun } from "./run";

function liveShown(run: LiveRun, conversationId: string): Shown {
  return {
    id: run.done?.message_id ?? null,
    role: "assistant",
    text: run.text,
    citations: run.citations.length ? run.citations : ((run.done?.citations ?? []) as LiveRun["citations"]),
    status: run.phase === "failed" ? "failed" : run.done?.status === "interrupted" ? "interrupted" : "complete",
    rating: null,
    agent: run.agent,
    searched: Boolean(run.done?.searched),
    conversationId,
  };
}

/** The answer's key while it streams and once stored, so the stored one keeps its elements. */
function turnKey(run: LiveRun): string {
  return `turn-${run.runId ?? "sending"}`;
}

interface TurnProps {
  message: Shown;
  /** The run in flight while this answer is not stored yet. */
  live?: LiveRun;
  waiting?: boolean;
  onTrace: (messageId: string) => void;
}

/**
 * One answer, streamed or stored, in one element shape: when the stored answer replaces the
 * streamed one (same key), React keeps its elements, so a chip under the pointer or holding the
 * keyboard focus stays where it was. The in-flight parts (steps, searches, status) are empty
 * slots once it is stored.
 */
function Turn({ message, live, waiting, onTrace }: TurnProps) {
  return (
    <div className={live ? "turn live" : "turn"}>
      {live?.steps.length ? (
        <ol className="steps" aria-label="Agent steps">
          {live.steps.map((s, i) => (
            <li key={i}>
              {s.function} › {s.command}
            </li>
          ))}
        </ol>
      ) : null}
      {live?.toolCalls.map((c) => (
        <p key={c.id} className="muted tool-call">
          Searching: <q dir="auto">{String(c.arguments.query ?? "")}</q>
        </p>
      ))}
      {live && (live.phase === "sending" || (live.phase === "streaming" && !live.text)) ? (
        <p className="muted">Thinking…</p>
      ) : null}
      {!live || live.text ? (
        <MessageView message={message} live={Boolean(live && !live.done?.message_id)} waiting={waiting} onTrace={onTrace} />
      ) : null}
      {live?.phase === "reconnecting" ? (
        <p className="badge reconnecting" role="status">
          Reconnecting…
        </p>
      ) : null}
      {live?.phase === "failed" ? <p role="alert">{live.error}</p> : null}
      {live?.done?.status === "paused" ? <p className="badge waiting">Waiting for your answer</p> : null}
    </div>
  );
}

interface Props {
  conversationId: string | null;
  /** Sent with the next message as its page context (the extension's "use this page"). */
  page?: Schemas["PageContext"] | null;
  /** Called once the page went out with a message. */
  onPageSent?: () => void;
}

export function ChatPage({ conversationId, page = null, onPageSent }: Props) {
  const conversation = useConversation(conversationId);
  const waiting = useWaiting(conversationId);
  const { run, send, stop } = useRun();
  const [trace, setTrace] = useState<string | null>(null);
  const [announce, setAnnounce] = useState("");
  const scroller = useRef<HTMLDivElement>(null);
  const stick = useRef(true);

  const messages = conversation.data?.messages ?? [];
  const mine = run && run.conversationId !== null && run.conversationId === conversationId ? run : null;
  const pending = run && run.conversationId === null && conversationId === null ? run : null;
  const live = mine ?? pending;
  const storedIds = new Set(messages.map((m) => m.id));
  const showUser = live && !(live.userMessageId && storedIds.has(live.userMessageId));
  const showAnswer = live && !(live.done?.message_id && storedIds.has(live.done.message_id));
  const busy = Boolean(live && (live.phase === "sending" || live.phase === "streaming" || live.phase === "reconnecting"));
  const waitingAgent = !busy ? (waiting.data?.agent ?? null) : null;
  const lastAnswer = [...messages].reverse().find((m) => m.role === "assistant");

  // The stored conversation may be read before the answer's transaction is visible: read it
  // again (a few times) until it holds the finished answer.
  const doneId = live?.done?.message_id ?? null;
  const missing = doneId !== null && conversation.isSuccess && !storedIds.has(doneId);
  const retries = useRef(0);
  useEffect(() => {
    if (!missing || conversation.isFetching || retries.current >= 5) return;
    retries.current += 1;
    const timer = window.setTimeout(() => void conversation.refetch(), 200 * retries.current);
    return () => window.clearTimeout(timer);
  }, [missing, conversation]);

  // Screen readers hear that an answer started and, once, the whole answer when it ends.
  const phase = live?.phase;
  useEffect(() => {
    if (phase === "streaming") setAnnounce("Answering…");
    if (phase === "done" && live) setAnnounce(`Answer: ${live.text}`);
    if (phase === "failed" && live) setAnnounce(`The answer failed: ${live.error ?? ""}`);
    if (phase === "reconnecting") setAnnounce("Connection lost, reconnecting…");
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [phase]);

  // Follow the answer while the reader is at the bottom; stop as soon as they scroll up.
  const textLength = (live?.text.length ?? 0) + messages.length;
  useEffect(() => {
    const element = scroller.current;
    if (element && stick.current) element.scrollTop = element.scrollHeight;
  }, [textLength]);

  const onScroll = () => {
    const element = scroller.current;
    if (!element) return;
    stick.current = element.scrollHeight - element.scrollTop - element.clientHeight < 48;
  };

  // One list, one key per answer: the streamed answer and the stored one that replaces it share
  // a key in the same array, so React reuses its elements instead of remounting them.
  const turns: ReactNode[] = messages.map((m) =>
    m.role === "user" ? (
      <MessageView key={m.id} message={shownOf(m)} />
    ) : (
      <Turn
        key={m.id === doneId && live ? turnKey(live) : m.id}
        message={shownOf(m)}
        waiting={waitingAgent !== null && m.id === lastAnswer?.id}
        onTrace={setTrace}
      />
    ),
  );
  if (live && showUser) {
    const shown = liveShown(live, conversationId ?? "");
    turns.push(<MessageView key="live-user" message={{ ...shown, id: null, role: "user", text: live.userText }} live />);
  }
  if (live && showAnswer) {
    turns.push(<Turn key={turnKey(live)} message={liveShown(live, conversationId ?? "")} live={live} onTrace={setTrace} />);
  }

  if (conversation.isError) {
    const missing = conversation.error instanceof ApiError && conversation.error.status === 404;
    return (
      <main className="chat" id="main">
        <p role="alert">{missing ? "This conversation does not exist (or was deleted)." : conversation.error.message}</p>
      </main>
    );
  }

  return (
    <main className="chat" id="main" aria-busy={busy}>
      <h1 className="visually-hidden">{conversation.data?.title ?? "New conversation"}</h1>
      <div className="messages" ref={scroller} onScroll={onScroll}>
        {!conversationId && !live ? (
          <div className="empty">
            <h2>What would you like to know?</h2>
            <p className="muted">Answers cite the documents they come from.</p>
          </div>
        ) : null}
        {turns}
      </div>
      <div className="visually-hidden" aria-live="polite" aria-atomic="true">
        {announce}
      </div>
      <Composer
        conversationId={conversationId}
        busy={busy}
        waitingAgent={waitingAgent}
        onSend={(text, agent) => {
          stick.current = true;
          void send(text, conversationId, agent, agent ? null : page);
          if (page && !agent) onPageSent?.();
        }}
        onStop={() => void stop()}
      />
      <TraceDrawer messageId={trace} onClose={() => setTrace(null)} />
    </main>
  );
}
