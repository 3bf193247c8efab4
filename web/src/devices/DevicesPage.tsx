// My devices: the tokens a device (the browser extension, a script) signs in with. Create one
// (its value is shown once, with a Copy button), list them, revoke one (`/v1/me/tokens`); and
// a link code for a messenger account (LinkCode).
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import { api, type Schemas } from "../api/client";
import { keys } from "../api/queries";
import { LinkCode } from "./LinkCode";

type Created = Schemas["OwnTokenCreated"];

function when(value: string | null | undefined): string {
  return value ? new Date(value).toLocaleString() : "never";
}

export function DevicesPage() {
  const id = useId();
  const queryClient = useQueryClient();
  const [name, setName] = useState("");
  const [created, setCreated] = useState<Created | null>(null);
  const [copied, setCopied] = useState(false);
  const tokens = useQuery({ queryKey: keys.tokens, queryFn: () => api<Schemas["OwnTokenListPublic"]>("/v1/me/tokens") });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: keys.tokens });
  const create = useMutation({
    mutationFn: (device: string) =>
      api<Created>("/v1/me/tokens", { method: "POST", json: { name: device } satisfies Schemas["OwnTokenCreate"] }),
    onSuccess: (token) => {
      setCreated(token);
      setCopied(false);
      setName("");
      refresh();
    },
  });
  const revoke = useMutation({
    mutationFn: (tokenId: number) => api<void>(`/v1/me/tokens/${tokenId}`, { method: "DELETE" }),
    onSuccess: (_none, tokenId) => {
      if (created?.id === tokenId) setCreated(null);
      refresh();
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate(name);
  };
  const copy = async (value: string) => {
    await navigator.clipboard.writeText(value);
    setCopied(true);
  };
  return (
    <main className="page" id="main">
      <h1>Devices</h1>
      <p className="muted">
        A device token signs in a device that cannot use this page's sign-in, such as the browser extension (paste it in
        its options page) or a script. Revoke it here when the device is lost or no longer used.
      </p>
      <form className="toolbar" aria-label="Create a device token" onSubmit={submit}>
        <label htmlFor={`${id}-name`}>Device name</label>
        <input
          id={`${id}-name`}
          required
          maxLength={100}
          placeholder="work laptop browser extension"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <button type="submit" className="primary" disabled={create.isPending}>
          Create token
        </button>
        {create.isError ? <span role="alert">{(create.error as Error).message}</span> : null}
      </form>
      {created ? (
        <section className="new-token" aria-label="New device token">
          <p>
            The token of <strong dir="auto">{created.name}</strong>. It is shown this once: copy it now.
          </p>
          <div className="toolbar">
            <code className="secret">{created.token}</code>
            <button type="button" onClick={() => void copy(created.token)}>
              {copied ? "Copied" : "Copy"}
            </button>
            <button type="button" className="link" onClick={() => setCreated(null)}>
              Done
            </button>
          </div>
        </section>
      ) : null}
      {tokens.isError ? <p role="alert">{(tokens.error as Error).message}</p> : null}
      {revoke.isError ? <p role="alert">{(revoke.error as Error).message}</p> : null}
      {tokens.data?.tokens.length === 0 ? <p>No device tokens yet.</p> : null}
      <table>
        <caption className="visually-hidden">Device tokens</caption>
        <thead>
          <tr>
            <th scope="col">Device</th>
            <th scope="col">Token</th>
            <th scope="col">Created</th>
            <th scope="col">Last used</th>
            <th scope="col">State</th>
          </tr>
        </thead>
        <tbody>
          {(tokens.data?.tokens ?? []).map((t) => (
            <tr key={t.id}>
              <td dir="auto">{t.name}</td>
              <td>
                <code>{t.prefix}…</code>
              </td>
              <td>{when(t.created_at)}</td>
              <td>{when(t.last_used_at)}</td>
              <td>
                {t.revoked ? (
                  "revoked"
                ) : (
                  <button
                    type="button"
                    className="link"
                    aria-label={`Revoke ${t.name}`}
                    disabled={revoke.isPending}
                    onClick={() => revoke.mutate(t.id)}
                  >
                    Revoke
                  </button>
                )}
                {t.local_only ? <span className="muted"> (local mode only)</span> : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <LinkCode />
    </main>
  );
}
