// The one way the app talks to the server: same-origin requests that always carry
// `X-Search2o-Client: web` (the server's CSRF check requires it with a session cookie) and never a
// token: the session is an HttpOnly cookie the browser sends. The browser extension, which no
// server serves, points the same wrapper at its configured server (`setRemote`): its own headers
// (its device token), and never a cookie.
import type { components } from "./schema";

export type Schemas = components["schemas"];

export const CLIENT_HEADER = { "X-Search2o-Client": "web" } as const;

/** A server other than the page's own origin, and what its requests carry (the extension). */
export interface Remote {
  /** The server's origin, e.g. `https://search2o.example.com`. */
  baseUrl: string;
  /** Headers added to every request (they may replace `X-Search2o-Client`). */
  headers: () => Record<string, string>;
  /** Called when the server answers 401 (an unknown or revoked token: signed out). */
  onUnauthorized?: () => void;
}

let remote: Remote | null = null;

/** Send every request to `next` from now on; `null`: the page's own origin again. */
export function setRemote(next: Remote | null): void {
  remote = next;
}

function headersOf(extra?: Record<string, string>): Record<string, string> {
  return { ...CLIENT_HEADER, ...remote?.headers(), ...extra };
}

/** An error answer of the API: its status and the `detail` body (field and reason on 422). */
export class ApiError extends Error {
  readonly status: number;
  readonly detail: Partial<Schemas["ErrorDetail"]>;

  constructor(status: number, detail: Partial<Schemas["ErrorDetail"]>) {
    super(describe(status, detail));
    this.status = status;
    this.detail = detail;
  }
}

function describe(status: number, detail: Partial<Schemas["ErrorDetail"]>): string {
  if (detail.field && detail.reason) return `${detail.field}: ${detail.reason}`;
  return detail.message ?? `the server answered ${status}`;
}

export interface RequestOptions {
  method?: string;
  json?: unknown;
  body?: BodyInit;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** Send one request; return the raw response when it is a success, else throw ApiError. */
export async function request(path: string, options: RequestOptions = {}): Promise<Response> {
  const headers = headersOf(options.headers);
  let body = options.body;
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.json);
  }
  const response = await fetch((remote?.baseUrl ?? "") + path, {
    method: options.method ?? "GET",
    headers,
    body,
    credentials: remote ? "omit" : "same-origin",
    signal: options.signal,
  });
  if (response.status === 401) remote?.onUnauthorized?.();
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function errorOf(response: Response): Promise<ApiError> {
  let detail: Partial<Schemas["ErrorDetail"]> = {};
  try {
    const parsed = (await response.json()) as { detail?: unknown };
    if (parsed && typeof parsed.detail === "object" && parsed.detail !== null) {
      detail = parsed.detail as Partial<Schemas["ErrorDetail"]>;
    }
  } catch {
    // not JSON: keep the status alone
  }
  return new ApiError(response.status, detail);
}

/** A JSON request: the parsed body (`undefined` for 204). */
export async function api<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const response = await request(path, options);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

/**
 * Upload a multipart form with progress (fetch reports no upload progress; XMLHttpRequest does).
 * Resolves with the parsed JSON body; rejects with ApiError.
 */
export function upload<T>(
  path: string,
  form: FormData,
  onProgress: (fraction: number) => void,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", (remote?.baseUrl ?? "") + path);
    for (const [name, value] of Object.entries(headersOf())) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onerror = () => reject(new ApiError(0, { message: "the upload failed: network error" }));
    xhr.onload = () => {
      let parsed: unknown = null;
      try {
        parsed = JSON.parse(xhr.responseText);
      } catch {
        parsed = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(1);
        resolve(parsed as T);
      } else {
        const detail = (parsed as { detail?: Partial<Schemas["ErrorDetail"]> } | null)?.detail;
        reject(new ApiError(xhr.status, detail ?? {}));
      }
    };
    xhr.send(form);
  });
}
