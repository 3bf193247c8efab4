// A `[n]` chip: a hover/focus card (title, heading path, snippet); a click opens the passage.
import { useEffect, useId, useRef, useState } from "react";
import { usePassage } from "../api/queries";
import { Dialog } from "../ui/Dialog";
import type { Citation } from "./run";
import { whereFrom } from "./sources";

function firstChunk(citation: Citation): number | null {
  const ids = (citation as { chunk_ids?: unknown }).chunk_ids;
  return Array.isArray(ids) && typeof ids[0] === "number" ? ids[0] : null;
}

function snippet(text: string, size = 220): string {
  // Markdown links read as their text: a card shows words, not URLs.
  const flat = text.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/\s+/g, " ").trim();
  return flat.length > size ? `${flat.slice(0, size)}…` : flat;
}

export function CitationChip({ citation }: { citation: Citation }) {
  const [hover, setHover] = useState(false);
  // Escape dismisses the card without moving the pointer (WCAG 2.1, 1.4.13 "Content on Hover
  // or Focus"); it stays dismissed until the pointer or focus leaves the chip.
  const [dismissed, setDismissed] = useState(false);
  const [open, setOpen] = useState(false);
  const chip = useRef<HTMLButtonElement>(null);
  const card = useId();
  const shown = hover && !dismissed && !open;
  useEffect(() => {
    if (!shown) return;
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== "Escape" || event.shiftKey) return;
      event.preventDefault();
      setDismissed(true);
      chip.current?.focus();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [shown]);
  useEffect(() => {
    // A streamed answer is redrawn from the stored message when it ends: a chip mounted under a
    // resting pointer gets no mouseenter, so it asks whether the pointer is already there.
    if (chip.current?.parentElement?.matches(":hover")) setHover(true);
  }, []);
  const leave = () => {
    setHover(false);
    setDismissed(false);
  };
  const chunk = firstChunk(citation);
  const passage = usePassage(hover || open ? chunk : null);
  const heading = citation.heading_path ?? [];
  const label = `Source ${citation.number}: ${citation.title}`;
  return (
    <span
      className="cite"
      onMouseEnter={() => setHover(true)}
      onMouseLeave={leave}
    >
      <button
        ref={chip}
        type="button"
        className="cite-chip"
        aria-label={label}
        aria-describedby={shown ? card : undefined}
        data-citation={citation.number}
        onFocus={() => setHover(true)}
        onBlur={leave}
        onClick={() => {
          if (chunk === null && citation.url) window.open(citation.url, "_blank", "noopener");
          else setOpen(true);
        }}
      >
        {citation.number}
      </button>
      {shown ? (
        <span role="tooltip" id={card} className="cite-card">
          <strong dir="auto">{citation.title}</strong>
          {heading.length ? <span className="muted" dir="auto">{heading.join(" › ")}</span> : null}
          {citation.url ? <span className="muted">{whereFrom(citation)}</span> : null}
          {passage.data ? <span dir="auto">{snippet(passage.data.text)}</span> : null}
        </span>
      ) : null}
      <Dialog title={citation.title} open={open} onClose={() => setOpen(false)} wide>
        <p className="muted" dir="auto">
          {[citation.source, ...heading].join(" › ")}
        </p>
        {passage.isError ? <p role="alert">{(passage.error as Error).message}</p> : null}
        {passage.data ? (
          <blockquote className="passage" dir="auto">
            {passage.data.text}
          </blockquote>
        ) : (
          <p>Loading the passage…</p>
        )}
      </Dialog>
    </span>
  );
}
