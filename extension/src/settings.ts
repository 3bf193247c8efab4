// The extension's settings, in chrome.storage.local (the extension's own storage: no web page
// can read it, unlike a page's localStorage): the server's origin and the device token.

export interface Stored {
  /** The server's origin, e.g. `https://search2o.example.com` (no path). */
  server: string | null;
  /** The device token (`s2o_...`), sent as `Authorization: Bearer`. */
  token: string | null;
  /** The token's id when this extension created it (to revoke it on sign-out). */
  tokenId: number | null;
}

export async function readStored(): Promise<Stored> {
  const found = await chrome.storage.local.get(["server", "token", "tokenId"]);
  return {
    server: typeof found.server === "string" ? found.server : null,
    token: typeof found.token === "string" ? found.token : null,
    tokenId: typeof found.tokenId === "number" ? found.tokenId : null,
  };
}

export async function writeStored(values: Partial<Stored>): Promise<void> {
  await chrome.storage.local.set(values);
}

export async function forgetToken(): Promise<void> {
  await chrome.storage.local.remove(["token", "tokenId"]);
}

/**
 * The origin of a server address as typed, or an error sentence.
 *
 * Only `http:` and `https:` are accepted; a path, query or fragment is dropped (the API lives
 * at the origin's `/v1`). Credentials in the address are refused.
 */
export function originOf(input: string): { origin: string } | { error: string } {
  let url: URL;
  try {
    url = new URL(input.trim());
  } catch {
    return { error: "not an address: write it like https://search2o.example.com" };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return { error: "the address must start with http:// or https://" };
  }
  if (url.username || url.password) return { error: "the address must not hold a user or password" };
  return { origin: url.origin };
}

/** The host permission pattern of exactly one origin (Chrome match patterns). */
export function patternOf(origin: string): string {
  return `${origin}/*`;
}

/** The key of chrome.storage.session where the context menu leaves the selection. */
export const DRAFT_KEY = "draft";
