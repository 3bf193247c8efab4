// Link a messenger account: mint a one-time link code for Slack, Telegram or Mattermost
// (`POST /v1/surfaces/link-codes`, shown once) and say where to type it. The messenger's bot
// takes the code (docs/surfaces.md "Link the sender"); nothing is linked from this page.
import { useMutation } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import { api, type Schemas } from "../api/client";

type Issued = Schemas["LinkCodePublic"];

// Where each messenger's bot takes the code (docs/slack.md, docs/telegram.md, docs/mattermost.md).
const MESSENGERS: Record<string, { label: string; how: (code: string) => string }> = {
  slack: { label: "Slack", how: (code) => `/search2o link ${code}, or "link ${code}" in a direct message to the app` },
  telegram: { label: "Telegram", how: (code) => `/link ${code} in the private chat with the bot` },
  mattermost: { label: "Mattermost", how: (code) => `/search2o link ${code}, or "link ${code}" in a direct message to the bot` },
};

export function LinkCode() {
  const id = useId();
  const [surface, setSurface] = useState("slack");
  const issue = useMutation({
    mutationFn: (chosen: string) =>
      api<Issued>("/v1/surfaces/link-codes", {
        method: "POST",
        json: { surface: chosen, minutes: 15 } satisfies Schemas["LinkCodeRequest"],
      }),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    issue.mutate(surface);
  };
  const issued = issue.data;
  const messenger = issued?.surface ? MESSENGERS[issued.surface] : undefined;
  return (
    <section aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Messenger accounts</h2>
      <p className="muted">
        Link your Slack, Telegram or Mattermost account so the bot answers you there with your own access rights. A code
        works once, for 15 minutes; getting another one drops the earlier one.
      </p>
      <form className="toolbar" aria-label="Get a link code" onSubmit={submit}>
        <label htmlFor={`${id}-surface`}>Messenger</label>
        <select id={`${id}-surface`} value={surface} onChange={(e) => setSurface(e.target.value)}>
          {Object.entries(MESSENGERS).map(([name, m]) => (
            <option key={name} value={name}>
              {m.label}
            </option>
          ))}
        </select>
        <button type="submit" disabled={issue.isPending}>
          Get a link code
        </button>
        {issue.isError ? <span role="alert">{(issue.error as Error).message}</span> : null}
      </form>
      {issued && messenger ? (
        <section className="new-token" aria-label="New link code">
          <p>
            Your {messenger.label} link code, until {new Date(issued.expires_at).toLocaleTimeString()}:{" "}
            <code className="secret">{issued.code}</code>
          </p>
          <p>Send {messenger.how(issued.code)}.</p>
        </section>
      ) : null}
    </section>
  );
}
