// What search2o remembers about me: list by agent, search by meaning, forget one.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { api, type Schemas } from "../api/client";
import { keys } from "../api/queries";

type Memory = Schemas["MemoryPublic"] | Schemas["MemoryHitPublic"];

export function MemoriesPage() {
  const [agent, setAgent] = useState("");
  const [typed, setTyped] = useState("");
  const [hits, setHits] = useState<Schemas["MemoryHitPublic"][] | null>(null);
  const queryClient = useQueryClient();
  const all = useQuery({
    queryKey: keys.memories(""),
    queryFn: () => api<Schemas["MemoryListPublic"]>("/v1/memories?limit=1000"),
  });
  const agents = [...new Set((all.data?.memories ?? []).map((m) => m.agent))].sort();
  const search = useMutation({
    mutationFn: (query: string) => {
      const body: Schemas["MemorySearchRequest"] = { query, limit: 20 };
      if (agent) body.agent = agent;
      return api<Schemas["MemorySearchPublic"]>("/v1/memories/search", { method: "POST", json: body });
    },
    onSuccess: (found) => setHits(found.memories),
  });
  const forget = useMutation({
    mutationFn: (m: Memory) =>
      api(`/v1/memories/${encodeURIComponent(m.agent)}/${encodeURIComponent(m.label)}`, { method: "DELETE" }),
    onSuccess: (_none, m) => {
      setHits((list) => list?.filter((h) => !(h.agent === m.agent && h.label === m.label)) ?? null);
      void queryClient.invalidateQueries({ queryKey: ["memories"] });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (typed.trim()) search.mutate(typed.trim());
    else setHits(null);
  };
  const shown: Memory[] = hits ?? (all.data?.memories ?? []).filter((m) => !agent || m.agent === agent);
  return (
    <main className="page" id="main">
      <h1>Memories</h1>
      <p className="muted">What search2o remembers about you, kept by the agents you use.</p>
      <form className="toolbar" onSubmit={submit} role="search">
        <label htmlFor="memory-agent">Agent</label>
        <select id="memory-agent" value={agent} onChange={(e) => setAgent(e.target.value)}>
          <option value="">All agents</option>
          {agents.map((a) => (
            <option key={a} value={a}>
              {a}
            </option>
          ))}
        </select>
        <label htmlFor="memory-search" className="visually-hidden">
          Search memories
        </label>
        <input id="memory-search" type="search" placeholder="Search by meaning" value={typed} onChange={(e) => setTyped(e.target.value)} />
        <button type="submit">Search</button>
      </form>
      {all.isError ? <p role="alert">{(all.error as Error).message}</p> : null}
      {search.isError ? <p role="alert">{(search.error as Error).message}</p> : null}
      {forget.isError ? <p role="alert">{(forget.error as Error).message}</p> : null}
      {shown.length === 0 && all.isSuccess ? (
        <p>{hits ? "No memory is about that." : "Nothing remembered yet."}</p>
      ) : (
        <table>
          <caption className="visually-hidden">Memories</caption>
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Label</th>
              <th scope="col">Memory</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {shown.map((m) => (
              <tr key={`${m.agent}/${m.label}`}>
                <td>{m.agent}</td>
                <td>{m.label}</td>
                <td dir="auto">{m.text}</td>
                <td>
                  <button type="button" onClick={() => forget.mutate(m)} aria-label={`Forget ${m.agent} ${m.label}`}>
                    Forget
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}
