// The side panel page: reads the server and token from the options, configures the Web App's
// request wrapper with them, and shows the chat — or why it cannot (no server set, signed out).
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode, useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { RunProvider } from "@web/chat/run";
import { routeInFragment } from "@web/router";
import "@web/styles.css";
import "./extension.css";
import { connect } from "./connect";
import { Panel } from "./Panel";
import { readStored, type Stored } from "./settings";

routeInFragment();

function Notice({ title, text }: { title: string; text: string }) {
  return (
    <main className="page notice" id="main">
      <h1>{title}</h1>
      <p>{text}</p>
      <button type="button" className="button primary" onClick={() => void chrome.runtime.openOptionsPage()}>
        Open the options
      </button>
    </main>
  );
}

function App() {
  const [stored, setStored] = useState<Stored | null>(null);
  const [signedOut, setSignedOut] = useState(false);

  useEffect(() => {
    const reload = () => {
      void readStored().then((next) => {
        setSignedOut(false);
        setStored(next);
      });
    };
    reload();
    const listener = (_changes: unknown, area: string) => {
      if (area === "local") reload();
    };
    chrome.storage.onChanged.addListener(listener);
    return () => chrome.storage.onChanged.removeListener(listener);
  }, []);

  // A fresh cache per server and token: nothing of one account shows under another.
  const queryClient = useMemo(
    () => new QueryClient({ defaultOptions: { queries: { refetchOnWindowFocus: false, retry: false } } }),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [stored?.server, stored?.token],
  );

  if (stored === null) return null;
  if (!stored.server) {
    return <Notice title="Set up search2o" text="Set your search2o server's address in the options." />;
  }
  connect(stored.server, stored.token, () => setSignedOut(true));
  if (signedOut) {
    return (
      <Notice
        title="Signed out"
        text="The server did not accept this device: its token was revoked, or none is set. Sign in again in the options."
      />
    );
  }
  return (
    <QueryClientProvider client={queryClient}>
      <RunProvider>
        <Panel />
      </RunProvider>
    </QueryClientProvider>
  );
}

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}
