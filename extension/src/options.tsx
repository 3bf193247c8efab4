// The options page: the server's address (host permission asked for that origin only, at the
// moment it is set) and sign-in with a device token the user can revoke.
import { StrictMode, useEffect, useState, type FormEvent } from "react";
import { createRoot } from "react-dom/client";
import { api, ApiError, type Schemas } from "@web/api/client";
import "@web/styles.css";
import "./extension.css";
import { connect } from "./connect";
import { forgetToken, originOf, patternOf, readStored, writeStored, type Stored } from "./settings";

const TOKEN_NAME = "browser extension";

async function whoAmI(server: string, token: string | null): Promise<string | null> {
  connect(server, token);
  try {
    return (await api<Schemas["MePublic"]>("/v1/me")).email;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

function Options() {
  const [stored, setStored] = useState<Stored | null>(null);
  const [address, setAddress] = useState("");
  const [token, setToken] = useState("");
  const [status, setStatus] = useState("");
  const [who, setWho] = useState<string | null>(null);

  const refresh = async () => {
    const next = await readStored();
    setStored(next);
    setAddress(next.server ?? "");
    if (!next.server) return;
    try {
      setWho(await whoAmI(next.server, next.token));
    } catch (error) {
      setStatus(`The server at ${next.server} did not answer: ${(error as Error).message}`);
    }
  };

  useEffect(() => {
    void refresh();
  }, []);

  const saveServer = async (event: FormEvent) => {
    event.preventDefault();
    const parsed = originOf(address);
    if ("error" in parsed) {
      setStatus(`Server address: ${parsed.error}`);
      return;
    }
    // Asked here, in the click, for this one origin only (optional_host_permissions).
    const granted = await chrome.permissions.request({ origins: [patternOf(parsed.origin)] });
    if (!granted) {
      setStatus(`Not saved: search2o needs your permission to reach ${parsed.origin}.`);
      return;
    }
    const previous = stored?.server;
    if (previous && previous !== parsed.origin) {
      await chrome.permissions.remove({ origins: [patternOf(previous)] });
      await forgetToken(); // a token belongs to its server
    }
    await writeStored({ server: parsed.origin });
    setStatus(`Saved: ${parsed.origin}`);
    await refresh();
  };

  const signIn = async (event: FormEvent) => {
    event.preventDefault();
    if (!stored?.server) return;
    const secret = token.trim();
    const email = secret ? await whoAmI(stored.server, secret).catch(() => null) : null;
    if (!email) {
      setStatus("Device token: the server did not accept it (unknown or revoked).");
      return;
    }
    await writeStored({ token: secret, tokenId: null });
    setToken("");
    setStatus(`Signed in as ${email}`);
    await refresh();
  };

  const createToken = async () => {
    if (!stored?.server) return;
    connect(stored.server, stored.token);
    try {
      const created = await api<Schemas["OwnTokenCreated"]>("/v1/me/tokens", {
        method: "POST",
        json: { name: TOKEN_NAME },
      });
      await writeStored({ token: created.token, tokenId: created.id });
      setStatus(`Created the device token ${created.prefix}… and signed in.`);
      await refresh();
    } catch (error) {
      setStatus(`Could not create a token: ${(error as Error).message}. Paste one instead.`);
    }
  };

  const signOut = async () => {
    if (stored?.server && stored.token && stored.tokenId !== null) {
      connect(stored.server, stored.token);
      await api(`/v1/me/tokens/${stored.tokenId}`, { method: "DELETE" }).catch(() => undefined);
    }
    await forgetToken();
    setStatus("Signed out.");
    await refresh();
  };

  return (
    <main className="page options" id="main">
      <h1>search2o options</h1>
      <form onSubmit={(e) => void saveServer(e)} aria-label="Server">
        <label htmlFor="server">Server address</label>
        <input
          id="server"
          type="url"
          placeholder="https://search2o.example.com"
          value={address}
          onChange={(e) => setAddress(e.target.value)}
        />
        <button type="submit" className="button primary">
          Save
        </button>
        <p className="muted">
          The extension asks for permission to reach this address only, and sends it your
          questions and, when you choose "Use this page", the page's text.
        </p>
      </form>
      {stored?.server ? (
        <section aria-label="Sign-in">
          <h2>Sign-in</h2>
          <p id="who">{who ? `Signed in as ${who}` : "Signed out"}</p>
          <form onSubmit={(e) => void signIn(e)}>
            <label htmlFor="token">Device token</label>
            <input
              id="token"
              type="password"
              autoComplete="off"
              placeholder="s2o_…"
              value={token}
              onChange={(e) => setToken(e.target.value)}
            />
            <button type="submit" className="button">
              Sign in
            </button>
          </form>
          <p className="muted">
            Create a token on the Web App's Devices page (<code>/devices</code>, or the button below
            when the server already knows you), and revoke it there.
            It is kept in the extension's own storage, never in a web page's.
          </p>
          <button type="button" className="button" onClick={() => void createToken()}>
            Create a device token for this browser
          </button>{" "}
          {stored.token ? (
            <button type="button" className="button" onClick={() => void signOut()}>
              Sign out
            </button>
          ) : null}
        </section>
      ) : null}
      <p role="status" id="status">
        {status}
      </p>
    </main>
  );
}

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <Options />
    </StrictMode>,
  );
}
