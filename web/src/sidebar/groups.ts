// Date groups of the sidebar: pinned first, then by last use (local time).
import type { PagedConversation } from "../api/queries";

export type Row =
  | { kind: "header"; label: string }
  | { kind: "conversation"; conversation: PagedConversation };

const DAY = 86_400_000;

export function groupOf(conversation: PagedConversation, now: Date): string {
  if (conversation.pinned) return "Pinned";
  const midnight = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const used = new Date(conversation.last_used_at).getTime();
  if (used >= midnight) return "Today";
  if (used >= midnight - 7 * DAY) return "Previous 7 days";
  if (used >= midnight - 30 * DAY) return "Previous 30 days";
  return "Older";
}

/** Interleave group headers with conversations (the list is already in page order). */
export function rowsOf(conversations: PagedConversation[], now: Date): Row[] {
  const rows: Row[] = [];
  let current = "";
  for (const conversation of conversations) {
    const label = groupOf(conversation, now);
    if (label !== current) {
      rows.push({ kind: "header", label });
      current = label;
    }
    rows.push({ kind: "conversation", conversation });
  }
  return rows;
}

export function expiresIn(expiresAt: string | null, now: Date): string | null {
  if (!expiresAt) return null;
  const days = Math.ceil((new Date(expiresAt).getTime() - now.getTime()) / DAY);
  if (days <= 0) return "expires today";
  return days === 1 ? "expires in 1 day" : `expires in ${days} days`;
}
