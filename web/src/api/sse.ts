// Server-Sent Events read from a fetch response (WHATWG HTML, "Server-sent events": fields
// `id`, `event`, `data`; a blank line ends an event; a line starting with ":" is a comment).
// EventSource cannot POST nor set our header, so the stream is parsed here.
import type { Schemas } from "./client";

export interface EventData {
  conversation: Schemas["ConversationEvent"];
  tool_call: Schemas["ToolCallEvent"];
  step: Schemas["StepEvent"];
  citation: Schemas["CitationEvent"];
  delta: Schemas["DeltaEvent"];
  done: Schemas["DoneEvent"];
  error: Schemas["ErrorEvent"];
}

export type EventKind = keyof EventData;

export type RunEvent = {
  [K in EventKind]: { kind: K; id: number; data: EventData[K] };
}[EventKind];

const KINDS: ReadonlySet<string> = new Set([
  "conversation",
  "tool_call",
  "step",
  "citation",
  "delta",
  "done",
  "error",
]);

/** Parse one event block; `null` for a comment, a heartbeat or an unknown kind. */
export function parseBlock(block: string): RunEvent | null {
  let kind = "message";
  let id = NaN;
  const data: string[] = [];
  for (const line of block.split(/\r\n|\r|\n/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") kind = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = Number(value);
  }
  if (!KINDS.has(kind) || data.length === 0) return null;
  return { kind, id, data: JSON.parse(data.join("\n")) } as RunEvent;
}

/** Yield the events of an SSE response body as they arrive. */
export async function* readEvents(response: Response): AsyncGenerator<RunEvent> {
  if (!response.body) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    const blocks = buffer.split(/\r\n\r\n|\n\n|\r\r/);
    buffer = blocks.pop() ?? "";
    for (const block of blocks) {
      const event = parseBlock(block);
      if (event) yield event;
    }
  }
  const last = parseBlock(buffer);
  if (last) yield last;
}
