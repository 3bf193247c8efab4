// Point the Web App's request wrapper at the configured server with the device token
// (RFC 6750, 2.1: `Authorization: Bearer <token>`), as `X-Search2o-Client: extension`.
import { setRemote } from "@web/api/client";

export function connect(server: string, token: string | null, onUnauthorized?: () => void): void {
  setRemote({
    baseUrl: server,
    headers: () => {
      const headers: Record<string, string> = { "X-Search2o-Client": "extension" };
      if (token) headers.Authorization = `Bearer ${token}`;
      return headers;
    },
    onUnauthorized,
  });
}
