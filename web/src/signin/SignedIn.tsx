// Renders the app only for a signed-in browser (or local mode); otherwise the sign-in page.
import type { ReactNode } from "react";
import { currentPath } from "../router";
import { LinkPage } from "./LinkPage";
import { SigninPage } from "./SigninPage";
import { useSession, useSessionEnded } from "./session";

export function SignedIn({ children }: { children: ReactNode }) {
  const session = useSession();
  const ended = useSessionEnded();
  // A sign-in link's page, signed in or not (a link may switch the browser to its account).
  if (currentPath() === "/signin/link") return <LinkPage />;
  if (session.isLoading) return null;
  if (session.data && !session.data.signed_in) {
    return <SigninPage session={session.data} ended={ended} />;
  }
  return <>{children}</>;
}
