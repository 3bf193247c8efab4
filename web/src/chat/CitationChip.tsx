// A `[n]` chip: a hover/focus card (title, heading path, snippet); a click opens the passage.
import { useId, useState } from "react";
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
  const [open, setOpen] = useState(false);
  const card = useId();
  const chunk = firstChunk(citation);
  const passage = usePassage(hover || open ? chunk : null);
  const heading = citation.heading_path ?? [];
  const label = `Source ${citation.number}: ${citation.title}`;
  return (
    <span
      className="cite"
      onMouseEnter={() => setHover(true)}
      onMouseLeave={() => setHover(false)}
    >
      <button
        type="button"
        className="cite-chip"
        aria-label={label}
        aria-describedby={hover ? card : undefined}
        data-citation={citation.number}
        onFocus={() => setHover(true)}
        onBlur={() => setHover(false)}
        onClick={() => {
          if (chunk === null && citation.url) window.open(citation.url, "_blank", "noopener");
          else setOpen(true);
        }}
      >
        {citation.number}
      </button>
      {hover ? (
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
