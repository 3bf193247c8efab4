// Thumbs up/down on an answer. A thumbs-down is saved at once, then a small inline form asks why
// (reasons and a comment, both optional): Send saves them with the rating, Skip (or Escape)
// closes the form and keeps the bare rating. A thumbs-up sends no form.
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useEffect, useId, useRef, useState } from "react";
import { api, type Schemas } from "../api/client";
import { keys } from "../api/queries";
import { Icon } from "../ui/icons";

type Reason = NonNullable<Schemas["RatingRequest"]["reasons"]>[number];
type RatingBody = Schemas["RatingRequest"];

/** The reasons in the order the form offers them, with their labels. */
export const REASONS: ReadonlyArray<[Reason, string]> = [
  ["wrong_source", "Wrong source"],
  ["missing_information", "Missing information"],
  ["outdated", "Outdated"],
  ["unsupported_citation", "A citation does not support the claim"],
];

// Answers whose form is open, by message id. The state outlives the component: a finished live
// answer is replaced by its stored copy (a new component), which may happen just after a click.
const asking = new Set<string>();

interface Props {
  messageId: string;
  conversationId: string;
  rating: string | null;
}

export function Rating({ messageId, conversationId, rating: stored }: Props) {
  const queryClient = useQueryClient();
  const [rating, setRating] = useState(stored);
  const [open, setOpen] = useState(() => asking.has(messageId));
  const [thanked, setThanked] = useState(false);
  const setAsking = (value: boolean) => {
    if (value) asking.add(messageId);
    else asking.delete(messageId);
    setOpen(value);
  };
  // The stored copy replaces the live answer and may arrive (or be read again) after a click:
  // what the server holds wins once it is read.
  useEffect(() => setRating(stored), [stored]);
  const rate = useMutation({
    mutationFn: (body: RatingBody) =>
      api<Schemas["MessagePublic"]>(`/v1/messages/${messageId}/rating`, { method: "PUT", json: body }),
    onSuccess: (saved) => {
      setRating(saved.rating);
      void queryClient.invalidateQueries({ queryKey: keys.conversation(conversationId) });
    },
  });
  const toggle = (value: "up" | "down") => {
    const next = rating === value ? null : value;
    setThanked(false);
    setAsking(next === "down");
    rate.mutate({ rating: next });
  };
  const send = (reasons: Reason[], comment: string) => {
    const body: RatingBody = { rating: "down", reasons };
    if (comment.trim()) body.comment = comment;
    rate.mutate(body, {
      onSuccess: () => {
        setAsking(false);
        setThanked(true);
      },
    });
  };
  return (
    <>
      <span className="rating" role="group" aria-label="Rate this answer">
        <button type="button" className="icon" aria-pressed={rating === "up"} aria-label="Good answer" onClick={() => toggle("up")}>
          <Icon name="up" filled={rating === "up"} />
        </button>
        <button type="button" className="icon" aria-pressed={rating === "down"} aria-label="Bad answer" onClick={() => toggle("down")}>
          <Icon name="down" filled={rating === "down"} />
        </button>
        {thanked ? <span role="status">Thanks for the feedback</span> : null}
        {rate.isError ? <span role="alert">{(rate.error as Error).message}</span> : null}
      </span>
      {open ? (
        <WhyForm busy={rate.isPending} onSend={send} onSkip={() => setAsking(false)} />
      ) : null}
    </>
  );
}

interface FormProps {
  busy: boolean;
  onSend: (reasons: Reason[], comment: string) => void;
  onSkip: () => void;
}

function WhyForm({ busy, onSend, onSkip }: FormProps) {
  const id = useId();
  const [chosen, setChosen] = useState<Reason[]>([]);
  const [comment, setComment] = useState("");
  const first = useRef<HTMLInputElement>(null);
  // The form opens under the button just pressed: move the keyboard into it.
  useEffect(() => first.current?.focus(), []);
  const flip = (reason: Reason, on: boolean) =>
    setChosen((now) => (on ? [...now.filter((r) => r !== reason), reason] : now.filter((r) => r !== reason)));
  return (
    <form
      className="why"
      aria-label="What was wrong with this answer?"
      onSubmit={(e) => {
        e.preventDefault();
        onSend(REASONS.map(([r]) => r).filter((r) => chosen.includes(r)), comment);
      }}
      onKeyDown={(e) => {
        if (e.key === "Escape") {
          e.preventDefault();
          onSkip();
        }
      }}
    >
      <fieldset>
        <legend>What was wrong? (optional)</legend>
        {REASONS.map(([reason, label], index) => (
          <label key={reason} className="check">
            <input
              ref={index === 0 ? first : undefined}
              type="checkbox"
              checked={chosen.includes(reason)}
              onChange={(e) => flip(reason, e.target.checked)}
            />
            {label}
          </label>
        ))}
      </fieldset>
      <label htmlFor={`${id}-comment`}>Comment (optional)</label>
      <textarea
        id={`${id}-comment`}
        dir="auto"
        rows={2}
        value={comment}
        onChange={(e) => setComment(e.target.value)}
      />
      <div className="buttons">
        <button type="submit" className="primary" disabled={busy}>
          Send
        </button>
        <button type="button" onClick={onSkip}>
          Skip
        </button>
      </div>
    </form>
  );
}
