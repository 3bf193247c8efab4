// The page a sign-in link opens (`/signin/link#<value>`): whom it signs in, and a button that
// uses it. Opening the page uses nothing up (a mail scanner or link preview fetches only this
// page); the value sits in the fragment, which the browser never sends to a server.
import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { api, ApiError, type Schemas } from "../api/client";

type Link = Schemas["LinkPublic"];

const UNUSABLE = "This sign-in link is unknown, already used or expired. Ask for a new one.";

function linkValue(): string {
  return window.location.hash.replace(/^#/, "").trim();
}

export function LinkPage() {
  const value = linkValue();
  const path = `/v1/auth/link/${encodeURIComponent(value)}`;
  const link = useQuery({
    queryKey: ["signin-link", value],
    queryFn: () => api<Link>(path),
    enabled: value !== "",
    retry: false,
    staleTime: Infinity,
  });
  const [failed, setFailed] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const signIn = async () => {
    setBusy(true);
    try {
      await api<Schemas["SessionPublic"]>(path, { method: "POST" });
      window.location.replace("/"); // a fresh load: nothing of an earlier account stays
    } catch (error) {
      setFailed(error instanceof ApiError && error.status === 401 ? UNUSABLE : "Sign-in failed.");
      setBusy(false);
    }
  };

  const unusable = value === "" || link.isError;
  return (
    <main className="page signin" id="main">
      <h1>Sign in to search2o</h1>
      {unusable || failed ? (
        <p role="alert" className="error">
          {failed ?? UNUSABLE}
        </p>
      ) : null}
      {link.data && !failed ? (
        <>
          <p>
            This link signs you in as <strong>{link.data.email}</strong>. Continue only if that is
            you.
          </p>
          <p>
            <button type="button" className="button" disabled={busy} onClick={() => void signIn()}>
              Sign in as {link.data.email}
            </button>
          </p>
        </>
      ) : null}
      {unusable || failed ? (
        <p>
          <a href="/">Back to the sign-in page</a>
        </p>
      ) : null}
    </main>
  );
}
