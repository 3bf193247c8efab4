// One message: the user's text, or an answer with its citations, sources and actions.
import { useState } from "react";
import { type Message } from "../api/queries";
import { AnswerMarkdown } from "./Markdown";
import { Rating } from "./Rating";
import type { Citation } from "./run";
import { whereFrom } from "./sources";

export interface Shown {
  id: string | null;
  role: string;
  text: string;
  citations: Citation[];
  status: string;
  rating: string | null;
  agent: string | null;
  searched: boolean;
  conversationId: string;
}

export function shownOf(message: Message): Shown {
  return {
    id: message.id,
    role: message.role,
    text: message.text,
    citations: message.citations as unknown as Citation[],
    status: message.status,
    rating: message.rating,
    agent: message.agent,
    searched: message.searched,
    conversationId: message.conversation_id,
  };
}

/** Only citations the text refers to with a `[n]` marker are kept (an unresolved one never shows). */
export function citedIn(text: string, citations: Citation[]): Citation[] {
  const used = new Set([...text.matchAll(/\[(\d{1,3})\]/g)].map((m) => Number(m[1])));
  return citations.filter((c) => used.has(c.number)).sort((a, b) => a.number - b.number);
}

export function withReferences(text: string, citations: Citation[]): string {
  const cited = citedIn(text, citations);
  if (!cited.length) return text;
  const lines = cited.map((c) => {
    const where = c.url ?? [c.source, ...(c.heading_path ?? [])].join(" › ");
    return `[${c.number}] ${c.title} — ${where}`;
  });
  return `${text}\n\n${lines.join("\n")}`;
}

interface Props {
  message: Shown;
  live?: boolean;
  waiting?: boolean;
  onTrace?: (messageId: string) => void;
}

export function MessageView({ message, live, waiting, onTrace }: Props) {
  const [copied, setCopied] = useState(false);
  if (message.role === "user") {
    return (
      <article className="message user" aria-label="Your message">
        <p dir="auto" className="plain">
          {message.text}
        </p>
      </article>
    );
  }
  const sources = citedIn(message.text, message.citations);
  const copy = async () => {
    await navigator.clipboard.writeText(withReferences(message.text, message.citations));
    setCopied(true);
  };
  return (
    <article className="message answer" aria-label={message.agent ? `Answer from ${message.agent}` : "Answer"}>
      {message.agent ? <span className="badge">{message.agent}</span> : null}
      <AnswerMarkdown text={message.text} citations={message.citations} />
      {message.status === "interrupted" ? <p className="muted">Stopped before the end.</p> : null}
      {message.status === "failed" ? <p className="muted">This answer failed before the end.</p> : null}
      {waiting ? <p className="badge waiting">Waiting for your answer</p> : null}
      {sources.length ? (
        <details className="sources">
          <summary>Sources ({sources.length})</summary>
          <ol>
            {sources.map((c) => (
              <li key={c.number} value={c.number} dir="auto">
                <strong>{c.title}</strong>
                <span className="muted"> {whereFrom(c)}</span>
              </li>
            ))}
          </ol>
        </details>
      ) : null}
      {!live && message.id ? (
        <footer className="actions">
          <Rating messageId={message.id} conversationId={message.conversationId} rating={message.rating} />
          <button type="button" className="link" onClick={() => void copy()}>
            {copied ? "Copied" : "Copy with references"}
          </button>
          {message.searched && onTrace ? (
            <button type="button" className="link" onClick={() => onTrace(message.id ?? "")}>
              How this answer was found
            </button>
          ) : null}
        </footer>
      ) : null}
    </article>
  );
}
