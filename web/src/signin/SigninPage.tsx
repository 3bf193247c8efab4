// The sign-in page: shown when GET /v1/auth/session says signed out, with the configured ways in.
import type { Session } from "./session";

// What a refused sign-in's code (`?signin_error=`) means; the server logs the precise reason.
const REFUSALS: Record<string, string> = {
  state: "The sign-in took too long or was started in another window. Please try again.",
  provider: "Your company's identity provider did not sign you in. Try again, or ask your administrator.",
  off: "Signing in with a company account is not configured on this server.",
};

export function SigninPage({ session, ended }: { session: Session; ended: boolean }) {
  const code = new URLSearchParams(window.location.search).get("signin_error");
  const refused = code === null ? null : (REFUSALS[code] ?? "Sign-in failed. Please try again.");
  return (
    <main className="page signin" id="main">
      <h1>Sign in to search2o</h1>
      {ended ? <p role="status">Your session has ended. Sign in again to continue.</p> : null}
      {refused ? (
        <p role="alert" className="error">
          {refused}
        </p>
      ) : null}
      {session.methods.includes("oidc") ? (
        <p>
          <a className="button" href="/v1/auth/oidc/login">
            Sign in with your company account
          </a>
        </p>
      ) : null}
      {session.methods.includes("link") ? (
        <p>
          {session.methods.includes("oidc") ? "Or open" : "Open"} a sign-in link from your
          administrator (
          <code>search2o users login-link you@example.com</code>).
        </p>
      ) : null}
    </main>
  );
}
