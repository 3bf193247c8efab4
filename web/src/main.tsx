import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { RunProvider } from "./chat/run";
import { SignedIn } from "./signin/SignedIn";
import { onAuthError } from "./signin/session";
import "./styles.css";

const queryClient: QueryClient = new QueryClient({
  defaultOptions: { queries: { refetchOnWindowFocus: false, retry: 1 } },
  queryCache: new QueryCache({ onError: (error) => onAuthError(queryClient, error) }),
  mutationCache: new MutationCache({ onError: (error) => onAuthError(queryClient, error) }),
});

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={queryClient}>
        <SignedIn>
          <RunProvider>
            <App />
          </RunProvider>
        </SignedIn>
      </QueryClientProvider>
    </StrictMode>,
  );
}
