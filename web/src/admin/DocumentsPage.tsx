// Admin: documents — upload with progress and an access list, the ingestion job followed to its
// outcomes, delete, index status.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef, useState, type FormEvent } from "react";
import { api, upload, type Schemas } from "../api/client";
import { keys } from "../api/queries";

const list = (value: string) =>
  value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

export function DocumentsPage() {
  const queryClient = useQueryClient();
  const files = useRef<HTMLInputElement>(null);
  const [groups, setGroups] = useState("");
  const [users, setUsers] = useState("");
  const [progress, setProgress] = useState<number | null>(null);
  const [jobId, setJobId] = useState<string | null>(null);
  const documents = useQuery({ queryKey: keys.documents, queryFn: () => api<Schemas["DocumentPublic"][]>("/v1/documents") });
  const send = useMutation({
    // 202: a job ingests the files; it is followed below until it is done or failed.
    mutationFn: (form: FormData) => upload<Schemas["UploadAcceptedPublic"]>("/v1/documents", form, setProgress),
    onSuccess: (accepted) => {
      setJobId(accepted.job.id);
      if (files.current) files.current.value = "";
    },
    onSettled: () => setProgress(null),
  });
  const job = useQuery({
    queryKey: ["job", jobId],
    queryFn: () => api<Schemas["JobPublic"]>(`/v1/jobs/${jobId}`),
    enabled: jobId !== null,
    refetchInterval: (query) => (finished(query.state.data) ? false : 500),
  });
  const ended = finished(job.data);
  useEffect(() => {
    if (ended) void queryClient.invalidateQueries({ queryKey: keys.documents });
  }, [ended, queryClient]);
  const outcomes = ended ? outcomesOf(job.data) : [];
  const remove = useMutation({
    mutationFn: (id: number) => api(`/v1/documents/${id}`, { method: "DELETE" }),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: keys.documents }),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const chosen = files.current?.files;
    if (!chosen?.length) return;
    const form = new FormData();
    for (const file of chosen) form.append("files", file, file.name);
    for (const g of list(groups)) form.append("groups", g);
    for (const u of list(users)) form.append("users", u);
    setJobId(null);
    setProgress(0);
    send.mutate(form);
  };
  return (
    <section>
      <h2>Documents</h2>
      <form className="stack" onSubmit={submit} aria-label="Upload documents">
        <label htmlFor="upload-files">Files (Markdown, text, HTML, PDF, DOCX)</label>
        <input id="upload-files" ref={files} type="file" multiple />
        <label htmlFor="upload-groups">Groups that may read them (comma-separated; none = everyone)</label>
        <input id="upload-groups" value={groups} onChange={(e) => setGroups(e.target.value)} placeholder="hr, finance" />
        <label htmlFor="upload-users">Users that may read them (emails, comma-separated)</label>
        <input id="upload-users" value={users} onChange={(e) => setUsers(e.target.value)} />
        <button type="submit" className="primary" disabled={progress !== null}>
          Upload
        </button>
        {progress !== null ? (
          <progress max={1} value={progress} aria-label="Upload progress">
            {Math.round(progress * 100)}%
          </progress>
        ) : null}
      </form>
      {send.isError ? <p role="alert">{(send.error as Error).message}</p> : null}
      {job.data && !ended ? (
        <p role="status">
          Ingesting{job.data.progress ? `: ${job.data.progress.done} of ${job.data.progress.total ?? "?"} files` : "…"}
        </p>
      ) : null}
      {job.data?.state === "failed" ? <p role="alert">The ingestion failed: {job.data.error}</p> : null}
      {outcomes.length ? (
        <ul className="outcomes" aria-label="Upload results">
          {outcomes.map((o) => (
            <li key={o.source}>
              <strong>{o.title || o.source}</strong>: {o.status}
              {o.chunks ? `, ${o.chunks} passages` : ""}
              {o.reason ? ` — ${o.reason}` : ""}
              {o.access_before ? ` (access changed from ${o.access_before.join(", ") || "everyone"})` : ""}
            </li>
          ))}
        </ul>
      ) : null}
      {remove.isError ? <p role="alert">{(remove.error as Error).message}</p> : null}
      <table>
        <caption className="visually-hidden">Documents</caption>
        <thead>
          <tr>
            <th scope="col">Title</th>
            <th scope="col">Source</th>
            <th scope="col">Readers</th>
            <th scope="col">Index</th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {(documents.data ?? []).map((d) => (
            <tr key={d.id}>
              <td dir="auto">{d.title}</td>
              <td className="muted">{d.source}</td>
              <td>{d.access.length ? d.access.join(", ") : "everyone"}</td>
              <td>{d.chunk_count ? `${d.chunk_count} passages` : "not indexed"}</td>
              <td>
                <button type="button" onClick={() => remove.mutate(d.id)} aria-label={`Delete ${d.title}`}>
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

const finished = (job: Schemas["JobPublic"] | undefined) => job?.state === "done" || job?.state === "failed";

/** The per-file outcomes a done `documents.ingest` job returns (`result.outcomes`). */
function outcomesOf(job: Schemas["JobPublic"] | undefined): Schemas["IngestPublic"][] {
  const result = job?.result as { outcomes?: Schemas["IngestPublic"][] } | null | undefined;
  return result?.outcomes ?? [];
}
