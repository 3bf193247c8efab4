// Who the browser is signed in as (GET /v1/auth/session), sign-out, and the ended-session state.
// The session itself is an HttpOnly cookie the app never sees: nothing here touches storage.
import { useQuery, type QueryClient } from "@tanstack/react-query";
import { api, ApiError, type Schemas } from "../api/client";
import { keys } from "../api/queries";

export type Session = Schemas["SessionPublic"];

export const sessionKey = ["auth-session"] as const;
const endedKey = ["auth-session-ended"] as const;

export function useSession() {
  return useQuery({
    queryKey: sessionKey,
    queryFn: () => api<Session>("/v1/auth/session"),
    staleTime: Infinity,
    retry: false,
  });
}

/** Whether the last session ended while the app was open (shown on the sign-in page). */
export function useSessionEnded() {
  return useQuery({ queryKey: endedKey, queryFn: () => false, staleTime: Infinity }).data === true;
}

/**
 * A 401 from any request means the session expired or was ended on the server: mark it ended
 * and ask the server again, which shows the sign-in page. A 403 may mean the user lost rights
 * (a demoted admin): ask who they are again, so the admin pages go at once.
 */
export function onAuthError(client: QueryClient, error: unknown): void {
  if (!(error instanceof ApiError)) return;
  if (error.status === 403) {
    void client.invalidateQueries({ queryKey: keys.me });
    return;
  }
  if (error.status !== 401) return;
  const current = client.getQueryData<Session>(sessionKey);
  if (current?.signed_in) client.setQueryData(endedKey, true);
  void client.invalidateQueries({ queryKey: sessionKey });
}

/**
 * Sign out: end the session on the server, then load the app afresh, so nothing of the user's
 * (cached answers, drafts in memory) outlives it; it opens on the sign-in page.
 */
export async function signOut(): Promise<void> {
  await api<void>("/v1/auth/logout", { method: "POST" });
  window.location.assign("/");
}
