// Server state through TanStack Query: one hook per read, one key per resource.
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { api, type Schemas } from "./client";

export const keys = {
  me: ["me"] as const,
  conversations: (q: string) => ["conversations", q] as const,
  allConversations: ["conversations"] as const,
  conversation: (id: string) => ["conversation", id] as const,
  waiting: (id: string) => ["waiting", id] as const,
  passage: (id: number) => ["passage", id] as const,
  trace: (id: string) => ["trace", id] as const,
  agents: ["agents"] as const,
  memories: (agent: string) => ["memories", agent] as const,
  documents: ["documents"] as const,
  users: ["users"] as const,
  feedback: ["feedback"] as const,
  settings: ["settings"] as const,
  tokens: ["tokens"] as const,
};

export type Me = Schemas["MePublic"];
export type PagedConversation = Schemas["PagedConversationPublic"];
export type ConversationDetail = Schemas["ConversationDetailPublic"];
export type Message = Schemas["MessagePublic"];

export function useMe() {
  return useQuery({ queryKey: keys.me, queryFn: () => api<Me>("/v1/me"), staleTime: 60_000 });
}

export const PAGE_SIZE = 50;

export function useConversationPages(q: string) {
  return useInfiniteQuery({
    queryKey: keys.conversations(q),
    initialPageParam: null as string | null,
    queryFn: ({ pageParam, signal }) => {
      const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
      if (pageParam) params.set("cursor", pageParam);
      if (q) params.set("q", q);
      return api<Schemas["ConversationPagePublic"]>(`/v1/me/conversations?${params}`, { signal });
    },
    getNextPageParam: (last) => last.next_cursor ?? undefined,
  });
}

export function useConversation(id: string | null) {
  return useQuery({
    queryKey: keys.conversation(id ?? ""),
    queryFn: () => api<ConversationDetail>(`/v1/conversations/${encodeURIComponent(id ?? "")}`),
    enabled: id !== null,
    retry: false,
  });
}

export function useWaiting(id: string | null) {
  return useQuery({
    queryKey: keys.waiting(id ?? ""),
    queryFn: () =>
      api<Schemas["WaitingPublic"]>(`/v1/conversations/${encodeURIComponent(id ?? "")}/waiting`),
    enabled: id !== null,
    retry: false,
  });
}

export function usePassage(chunkId: number | null) {
  return useQuery({
    queryKey: keys.passage(chunkId ?? 0),
    queryFn: () => api<Schemas["PassagePublic"]>(`/v1/passages/${chunkId}`),
    enabled: chunkId !== null,
    staleTime: Infinity,
    retry: false,
  });
}

export function useTrace(messageId: string | null) {
  return useQuery({
    queryKey: keys.trace(messageId ?? ""),
    queryFn: () =>
      api<Record<string, unknown>>(`/v1/messages/${encodeURIComponent(messageId ?? "")}/trace`),
    enabled: messageId !== null,
    retry: false,
  });
}

export function useAgents() {
  return useQuery({
    queryKey: keys.agents,
    queryFn: () => api<Schemas["AgentListPublic"]>("/v1/agents"),
  });
}
