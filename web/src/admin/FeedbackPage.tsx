// Admin: feedback triage — rated answers with the rater's reasons and comment, each linked to its
// retrieval trace.
import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { api, type Schemas } from "../api/client";
import { keys } from "../api/queries";
import { REASONS } from "../chat/Rating";
import { TraceDrawer } from "../chat/TraceDrawer";

const LABELS = new Map<string, string>(REASONS);

export function FeedbackPage() {
  const [rating, setRating] = useState<"down" | "up" | "any">("down");
  const [trace, setTrace] = useState<string | null>(null);
  const feedback = useQuery({
    queryKey: [...keys.feedback, rating],
    queryFn: () => api<Schemas["FeedbackPublic"]>(`/v1/feedback?rating=${rating}`),
  });
  return (
    <section>
      <h2>Feedback</h2>
      <div className="toolbar">
        <label htmlFor="feedback-rating">Ratings</label>
        <select id="feedback-rating" value={rating} onChange={(e) => setRating(e.target.value as typeof rating)}>
          <option value="down">Thumbs down</option>
          <option value="up">Thumbs up</option>
          <option value="any">All</option>
        </select>
      </div>
      {feedback.isError ? <p role="alert">{(feedback.error as Error).message}</p> : null}
      {feedback.data?.feedback.length === 0 ? <p>No rated answers.</p> : null}
      <table>
        <caption className="visually-hidden">Rated answers</caption>
        <thead>
          <tr>
            <th scope="col">Rated</th>
            <th scope="col">User</th>
            <th scope="col">Rating</th>
            <th scope="col">Reasons</th>
            <th scope="col">Comment</th>
            <th scope="col">Answer</th>
          </tr>
        </thead>
        <tbody>
          {(feedback.data?.feedback ?? []).map((f) => (
            <tr key={f.message_id}>
              <td>{new Date(f.rated_at).toLocaleString()}</td>
              <td>{f.user_email}</td>
              <td>{f.rating === "down" ? "thumbs down" : "thumbs up"}</td>
              <td>{f.reasons.map((r) => LABELS.get(r) ?? r).join(", ")}</td>
              <td dir="auto" className="comment">
                {f.comment ?? ""}
              </td>
              <td>
                {f.has_trace ? (
                  <button type="button" className="link" onClick={() => setTrace(f.message_id)}>
                    Retrieval trace
                  </button>
                ) : (
                  <span className="muted">{f.agent ? `agent ${f.agent}` : "no trace"}</span>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <TraceDrawer messageId={trace} onClose={() => setTrace(null)} />
    </section>
  );
}
