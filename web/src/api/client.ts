// The one way the app talks to the server. The Web App: same-origin requests that always carry
// `X-Search2o-Client: web` (the server's CSRF check will require it) and never a token. The
// browser extension configures the same wrapper once (`configureClient`) with the server's
// address and its device token, sent as `Authorization: Bearer` (RFC 6750, 2.1), no cookies.
import type { components } from "./schema";

export type Schemas = components["schemas"];

/** Where requests go and who sends them. */
export interface Transport {
  /** The server's origin, e.g. `https://search2o.example.com`; "" for the page's own origin. */
  baseUrl: string;
  /** The `X-Search2o-Client` value: `web` or `extension`. */
  client: string;
  /** A bearer token, or null (the Web App sends none). */
  token: string | null;
  /** Called when the server answers 401 (a revoked or unknown token: signed out). */
  onUnauthorized: (() => void) | null;
}

let transport: Transport = { baseUrl: "", client: "web", token: null, onUnauthorized: null };

/** Change where and how requests are sent (the extension, after reading its options). */
export function configureClient(next: Partial<Transport>): void {
  transport = { ...transport, ...next };
}

/** The headers every request carries. */
export function clientHeaders(): Record<string, string> {
  const headers: Record<string, string> = { "X-Search2o-Client": transport.client };
  if (transport.token) headers.Authorization = `Bearer ${transport.token}`;
  return headers;
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
  const headers: Record<string, string> = { ...clientHeaders(), ...options.headers };
  let body = options.body;
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.json);
  }
  const response = await fetch(transport.baseUrl + path, {
    method: options.method ?? "GET",
    headers,
    body,
    // Another origin (the extension's server) gets the token only, never a cookie.
    credentials: transport.baseUrl ? "omit" : "same-origin",
    signal: options.signal,
  });
  if (response.status === 401) transport.onUnauthorized?.();
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
    xhr.open("POST", transport.baseUrl + path);
    for (const [name, value] of Object.entries(clientHeaders())) xhr.setRequestHeader(name, value);
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
