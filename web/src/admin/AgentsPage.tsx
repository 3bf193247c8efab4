// Admin: agents — push a JSON/YAML definition (every problem shown at its path), validate with
// the trace, delete.
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { ApiError, api, request, type Schemas } from "../api/client";
import { keys, useAgents } from "../api/queries";

export function AgentsPage() {
  const queryClient = useQueryClient();
  const agents = useAgents();
  const [name, setName] = useState("");
  const [format, setFormat] = useState<"json" | "yaml">("json");
  const [source, setSource] = useState("");
  const [problems, setProblems] = useState<Schemas["ProblemPublic"][]>([]);
  const [validating, setValidating] = useState<string | null>(null);
  const [query, setQuery] = useState("");
  const [result, setResult] = useState<Record<string, unknown> | null>(null);
  const push = useMutation({
    mutationFn: async () => {
      const response = await request(`/v1/agents/${encodeURIComponent(name)}`, {
        method: "PUT",
        body: source,
        headers: { "Content-Type": format === "json" ? "application/json" : "application/yaml" },
      });
      return (await response.json()) as Schemas["AgentPutPublic"];
    },
    onMutate: () => setProblems([]),
    onError: (error) => {
      if (error instanceof ApiError) setProblems(error.detail.problems ?? []);
    },
    onSuccess: () => queryClient.invalidateQueries({ queryKey: keys.agents }),
  });
  const remove = useMutation({
    mutationFn: (agent: string) =>
      api<Schemas["AgentDeletedPublic"]>(`/v1/agents/${encodeURIComponent(agent)}`, { method: "DELETE" }),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: keys.agents }),
  });
  const validate = useMutation({
    mutationFn: ({ agent, text }: { agent: string; text: string }) =>
      api<Record<string, unknown>>(`/v1/agents/${encodeURIComponent(agent)}/validate`, {
        method: "POST",
        json: { query: text },
      }),
    onSuccess: setResult,
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    push.mutate();
  };
  return (
    <section>
      <h2>Agents</h2>
      <table>
        <caption className="visually-hidden">Agents</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Description</th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {(agents.data?.agents ?? []).map((a) => (
            <tr key={a.name}>
              <td>{a.name}</td>
              <td dir="auto">{a.description}</td>
              <td className="buttons">
                <button type="button" onClick={() => { setValidating(a.name); setResult(null); }}>
                  Validate
                </button>
                <button type="button" onClick={() => remove.mutate(a.name)} aria-label={`Delete agent ${a.name}`}>
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {remove.isError ? <p role="alert">{(remove.error as Error).message}</p> : null}
      {validating ? (
        <form
          className="stack"
          aria-label={`Validate ${validating}`}
          onSubmit={(event) => {
            event.preventDefault();
            validate.mutate({ agent: validating, text: query });
          }}
        >
          <label htmlFor="validate-query">Test message for {validating}</label>
          <input id="validate-query" value={query} onChange={(e) => setQuery(e.target.value)} />
          <button type="submit">Run a validation run</button>
          {validate.isError ? <p role="alert">{(validate.error as Error).message}</p> : null}
          {result ? (
            <pre className="trace-json" aria-label="Validation trace">
              {JSON.stringify(result, null, 2)}
            </pre>
          ) : null}
        </form>
      ) : null}
      <form className="stack" onSubmit={submit} aria-label="Push an agent definition">
        <h3>Push a definition</h3>
        <label htmlFor="agent-name">Name</label>
        <input id="agent-name" value={name} onChange={(e) => setName(e.target.value)} required />
        <fieldset>
          <legend>Format</legend>
          <label>
            <input type="radio" name="format" checked={format === "json"} onChange={() => setFormat("json")} /> JSON
          </label>
          <label>
            <input type="radio" name="format" checked={format === "yaml"} onChange={() => setFormat("yaml")} /> YAML
          </label>
        </fieldset>
        <label htmlFor="agent-source">Definition</label>
        <textarea id="agent-source" rows={12} value={source} onChange={(e) => setSource(e.target.value)} spellCheck={false} />
        <button type="submit" className="primary">
          Push
        </button>
        {push.isSuccess ? (
          <p role="status">
            {push.data.created ? "Stored" : "Replaced"} {push.data.name}.
          </p>
        ) : null}
        {push.isError ? <p role="alert">{(push.error as Error).message}</p> : null}
        {problems.length ? (
          <ul className="problems" aria-label="Problems">
            {problems.map((p, i) => (
              <li key={i}>
                <code>{p.path}</code>: {p.reason}
              </li>
            ))}
          </ul>
        ) : null}
      </form>
    </section>
  );
}
