// "Use this page": read the active tab's readable text, show it for the user to read and edit,
// and send it with the next message as its page context (POST /v1/chat `page`).
import { useState } from "react";
import type { Schemas } from "@web/api/client";
import { activeTab, MAX_PAGE_CHARS, readTab } from "./extract";

type Page = Schemas["PageContext"];

interface Props {
  page: Page | null;
  onChange: (page: Page | null) => void;
}

export function PagePreview({ page, onChange }: Props) {
  const [error, setError] = useState<string | null>(null);
  const [reading, setReading] = useState(false);

  const read = async () => {
    setError(null);
    setReading(true);
    try {
      const tab = await activeTab();
      if (tab?.id === undefined) throw new Error("no page is open in this window");
      const found = await readTab(tab.id);
      if (!found.text) throw new Error("this page has no readable text");
      onChange({ url: found.url, title: found.title, text: found.text });
    } catch (caught) {
      // chrome://, the Web Store and PDF viewers cannot be read by any extension
      setError(`This page cannot be read: ${(caught as Error).message}`);
    } finally {
      setReading(false);
    }
  };

  if (!page) {
    return (
      <div className="page-bar">
        <button type="button" className="button" onClick={() => void read()} disabled={reading}>
          {reading ? "Reading the page…" : "Use this page"}
        </button>
        {error ? <p role="alert" className="muted">{error}</p> : null}
      </div>
    );
  }
  return (
    <section className="page-bar page-preview" aria-label="Page sent with your next message">
      <p className="muted">
        Sent with your next message as <strong>this page</strong>:{" "}
        <span dir="auto">{page.title || page.url}</span>
      </p>
      <label htmlFor="page-text" className="visually-hidden">
        Page text to send
      </label>
      <textarea
        id="page-text"
        dir="auto"
        rows={6}
        maxLength={MAX_PAGE_CHARS}
        value={page.text}
        onChange={(event) => onChange({ ...page, text: event.target.value })}
      />
      <div className="page-actions">
        <span className="muted">
          {page.text.length.toLocaleString()} / {MAX_PAGE_CHARS.toLocaleString()} characters
        </span>
        <button type="button" className="button" onClick={() => onChange(null)}>
          Don't send the page
        </button>
      </div>
    </section>
  );
}
