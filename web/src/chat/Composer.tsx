// The message box: Enter sends, Shift+Enter breaks the line; the draft survives a reload.
import { useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import { useAgents } from "../api/queries";

const draftKey = (conversationId: string | null) => `search2o.draft.${conversationId ?? "new"}`;

interface Props {
  conversationId: string | null;
  busy: boolean;
  waitingAgent: string | null;
  onSend: (text: string, agent: string | null) => void;
  onStop: () => void;
}

export function Composer({ conversationId, busy, waitingAgent, onSend, onStop }: Props) {
  const [text, setText] = useState(() => localStorage.getItem(draftKey(conversationId)) ?? "");
  const [agent, setAgent] = useState("");
  const agents = useAgents();
  const box = useRef<HTMLTextAreaElement>(null);

  useEffect(() => {
    setText(localStorage.getItem(draftKey(conversationId)) ?? "");
  }, [conversationId]);

  const change = (value: string) => {
    setText(value);
    if (value) localStorage.setItem(draftKey(conversationId), value);
    else localStorage.removeItem(draftKey(conversationId));
  };

  const submit = (event?: FormEvent) => {
    event?.preventDefault();
    const message = text.trim();
    if (!message || busy) return;
    onSend(message, waitingAgent ? null : agent || null);
    change("");
  };

  const keyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === "Enter" && !event.shiftKey && !event.nativeEvent.isComposing) {
      event.preventDefault();
      submit();
    }
  };

  const list = agents.data?.agents ?? [];
  return (
    <form className="composer" onSubmit={submit} aria-label="Send a message">
      {waitingAgent ? (
        <p className="muted" id="composer-hint">
          {waitingAgent} asked a question: your next message answers it.
        </p>
      ) : null}
      <div className="composer-row">
        <label htmlFor="composer" className="visually-hidden">
          Message
        </label>
        <textarea
          id="composer"
          ref={box}
          rows={2}
          dir="auto"
          value={text}
          placeholder={waitingAgent ? `Answer ${waitingAgent}…` : "Ask about your company's knowledge…"}
          aria-describedby={waitingAgent ? "composer-hint" : undefined}
          onChange={(event) => change(event.target.value)}
          onKeyDown={keyDown}
        />
        {busy ? (
          <button type="button" className="stop" onClick={onStop}>
            Stop
          </button>
        ) : (
          <button type="submit" className="primary" disabled={!text.trim()}>
            Send
          </button>
        )}
      </div>
      {list.length && !waitingAgent ? (
        <div className="composer-options">
          <label htmlFor="agent-pick">Agent</label>
          <select id="agent-pick" value={agent} onChange={(event) => setAgent(event.target.value)}>
            <option value="">None (search the knowledge)</option>
            {list.map((a) => (
              <option key={a.name} value={a.name}>
                {a.name}
                {a.description ? ` — ${a.description}` : ""}
              </option>
            ))}
          </select>
        </div>
      ) : null}
    </form>
  );
}
