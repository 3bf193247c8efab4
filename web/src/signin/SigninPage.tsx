// The sign-in page: shown when GET /v1/auth/session says signed out, with the configured ways in.
import type { Session } from "./session";

export function SigninPage({ session, ended }: { session: Session; ended: boolean }) {
  const refused = new URLSearchParams(window.location.search).get("signin_error");
  return (
    <main className="page signin" id="main">
      <h1>Sign in to search2o</h1>
      {ended ? <p role="status">Your session has ended. Sign in again to continue.</p> : null}
      {refused ? (
        <p role="alert" className="error">
          Sign-in failed: {refused}
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
          Or open a sign-in link from your administrator (
          <code>search2o users login-link you@example.com</code>).
        </p>
      ) : null}
    </main>
  );
}
