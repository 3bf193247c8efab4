// How a cited source is named where the reader sees it (the sources list, a chip's card).
import type { Citation } from "./run";

/**
 * Where a source is: a document's path and headings; a web page's address; a page the user
 * sent (source "this page") as "this page · <address>".
 */
export function whereFrom(c: Citation): string {
  if (!c.url) return [c.source, ...(c.heading_path ?? [])].join(" › ");
  return c.document_id == null && c.source !== c.url ? `${c.source} · ${c.url}` : c.url;
}
