// A small router over the History API: the server answers index.html for every app path.
// The browser extension's pages are files (`sidepanel.html`), so there the app path lives in
// the URL's fragment instead (`sidepanel.html#/c/<id>`): `routeInFragment()` switches once.
import { useSyncExternalStore, type MouseEvent } from "react";

const listeners = new Set<() => void>();
let inHash = false;

/** Keep the app path in the fragment (`#/c/<id>`) instead of the path. */
export function routeInFragment(): void {
  inHash = true;
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  window.addEventListener("popstate", listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener("popstate", listener);
  };
}

/** The app path: `/`, `/c/<id>`, ... */
export function currentPath(): string {
  if (!inHash) return window.location.pathname;
  return window.location.hash.startsWith("#/") ? window.location.hash.slice(1) : "/";
}

export function navigate(path: string, replace = false, state: HistoryState | null = null): void {
  if (path === currentPath()) return;
  const target = inHash ? `${window.location.pathname}${window.location.search}#${path}` : path;
  if (replace) window.history.replaceState(state, "", target);
  else window.history.pushState(state, "", target);
  for (const listener of listeners) listener();
}

/** What a navigation may leave in `history.state`. */
export interface HistoryState {
  /** The page moved from `/` to the conversation its first message created: the same page. */
  adopted?: boolean;
}

/** Whether the current entry is a new conversation's page adopting its address. */
export function isAdopted(): boolean {
  return (window.history.state as HistoryState | null)?.adopted === true;
}

export function usePath(): string {
  return useSyncExternalStore(subscribe, currentPath);
}

/** A same-document link: a left click without modifier keys navigates without a reload. */
export function onLinkClick(event: MouseEvent<HTMLAnchorElement>): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
    return;
  }
  event.preventDefault();
  navigate(event.currentTarget.getAttribute("href") ?? "/");
}

export type Route =
  | { page: "chat"; conversationId: string | null }
  | { page: "memories" }
  | { page: "devices" }
  | { page: "admin"; section: AdminSection }
  | { page: "missing" };

export const ADMIN_SECTIONS = ["documents", "agents", "users", "feedback", "settings"] as const;
export type AdminSection = (typeof ADMIN_SECTIONS)[number];

export function routeOf(path: string): Route {
  if (path === "/" || path === "") return { page: "chat", conversationId: null };
  const chat = /^\/c\/([0-9a-f]{32})$/.exec(path);
  if (chat?.[1]) return { page: "chat", conversationId: chat[1] };
  if (path === "/memories") return { page: "memories" };
  if (path === "/devices") return { page: "devices" };
  const admin = /^\/admin\/([a-z]+)$/.exec(path);
  const section = admin?.[1] as AdminSection | undefined;
  if (section && (ADMIN_SECTIONS as readonly string[]).includes(section)) {
    return { page: "admin", section };
  }
  return { page: "missing" };
}
