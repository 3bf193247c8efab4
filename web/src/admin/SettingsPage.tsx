// Admin: the settings the API exposes (read-only; they are set in the server's configuration).
import { useQuery } from "@tanstack/react-query";
import { api, type Schemas } from "../api/client";
import { keys } from "../api/queries";

export function SettingsPage() {
  const settings = useQuery({ queryKey: keys.settings, queryFn: () => api<Schemas["ServerSettingsPublic"]>("/v1/settings") });
  const s = settings.data;
  const days = (value: number | null | undefined) => (value == null ? "never expire" : `${value} days`);
  return (
    <section>
      <h2>Settings</h2>
      {settings.isError ? <p role="alert">{(settings.error as Error).message}</p> : null}
      {s ? (
        <dl className="settings">
          <dt>Web search</dt>
          <dd>{s.web_search ? `on (${s.web_search_provider})` : "off"}</dd>
          <dt>Chat model</dt>
          <dd>
            {s.chat_provider}
            {s.chat_model ? ` · ${s.chat_model}` : ""}
          </dd>
          <dt>Sign-in</dt>
          <dd>{s.auth_mode === "local" ? "local single-user mode" : "API tokens"}</dd>
          <dt>Database</dt>
          <dd>{s.database}</dd>
          <dt>Retention (free plan)</dt>
          <dd>{days(s.retention_days.free)}</dd>
          <dt>Retention (paid plan)</dt>
          <dd>{days(s.retention_days.paid)}</dd>
        </dl>
      ) : null}
      <p className="muted">
        These are set in the server's configuration (<code>SEARCH2O_*</code> or its TOML file).
      </p>
    </section>
  );
}
