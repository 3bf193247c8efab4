// "How this answer was found": the retrieval trace (the queries the model wrote, the hits,
// what was packed into the window, timings) in a side drawer.
import { useTrace } from "../api/queries";
import { Dialog } from "../ui/Dialog";

interface ToolCallTrace {
  name?: string;
  query?: string;
  arguments?: Record<string, unknown>;
  hits?: { chunk_id?: number; document_id?: number; score?: number; url?: string }[];
  ms?: number;
  error?: string;
}

interface Packed {
  passages?: { number: number; chunk_id?: number | null; url?: string | null; chars: number }[];
  dropped_passages?: unknown[];
  context_chars?: number;
  history_messages?: number;
}

export function TraceDrawer({ messageId, onClose }: { messageId: string | null; onClose: () => void }) {
  const trace = useTrace(messageId);
  const data = trace.data as
    | { decision?: string; tool_calls?: ToolCallTrace[]; packed?: Packed; timings?: Record<string, number> }
    | undefined;
  return (
    <Dialog title="How this answer was found" open={messageId !== null} onClose={onClose} side>
      {trace.isLoading ? <p>Loading the trace…</p> : null}
      {trace.isError ? <p role="alert">{(trace.error as Error).message}</p> : null}
      {data ? (
        <div className="trace">
          <p>
            Decision: <strong>{data.decision === "tools" ? "searched" : "answered directly"}</strong>
          </p>
          {(data.tool_calls ?? []).map((call, index) => (
            <section key={index} className="trace-call">
              <h3>
                {call.name ?? "tool"}: <q dir="auto">{call.query ?? String(call.arguments?.query ?? "")}</q>
              </h3>
              {call.error ? <p role="alert">{call.error}</p> : null}
              <ol>
                {(call.hits ?? []).map((hit, i) => (
                  <li key={i}>
                    {hit.url ??
                      `document ${hit.document_id}, passage ${hit.chunk_id}, score ${hit.score?.toFixed(4)}`}
                  </li>
                ))}
              </ol>
              {call.ms !== undefined ? <p className="muted">{call.ms} ms</p> : null}
            </section>
          ))}
          {data.packed ? (
            <section>
              <h3>Packed into the model's window</h3>
              <p>
                {data.packed.passages?.length ?? 0} passages ({data.packed.context_chars ?? 0} characters),{" "}
                {data.packed.dropped_passages?.length ?? 0} dropped, {data.packed.history_messages ?? 0} history
                messages
              </p>
              <ul>
                {(data.packed.passages ?? []).map((p) => (
                  <li key={p.number}>
                    [{p.number}] {p.url ?? `passage ${p.chunk_id}`} — {p.chars} characters
                  </li>
                ))}
              </ul>
            </section>
          ) : null}
          {data.timings ? (
            <section>
              <h3>Timings</h3>
              <ul>
                {Object.entries(data.timings).map(([name, ms]) => (
                  <li key={name}>
                    {name}: {typeof ms === "number" ? ms.toFixed(1) : String(ms)} ms
                  </li>
                ))}
              </ul>
            </section>
          ) : null}
        </div>
      ) : null}
    </Dialog>
  );
}
