// The shell: header, conversation sidebar (a drawer below 800 px), the page of the route.
import { useEffect, useRef, useState } from "react";
import { AdminPage } from "./admin/AdminPage";
import { useMe } from "./api/queries";
import { ChatPage } from "./chat/ChatPage";
import { DevicesPage } from "./devices/DevicesPage";
import { MemoriesPage } from "./memories/MemoriesPage";
import { isAdopted, navigate, onLinkClick, routeOf, usePath } from "./router";
import { Sidebar } from "./sidebar/Sidebar";
import { signOut, useSession } from "./signin/session";
import { Dialog } from "./ui/Dialog";
import { Icon } from "./ui/icons";
import { SHORTCUTS } from "./ui/shortcuts";

export function App() {
  const path = usePath();
  const route = routeOf(path);
  const me = useMe();
  const session = useSession().data;
  const [menu, setMenu] = useState(false);
  const [help, setHelp] = useState(false);
  const search = useRef<HTMLInputElement>(null);
  const isAdmin = me.data?.is_admin === true;
  // A conversation's page is keyed by its id, so another conversation starts afresh; but a new
  // chat moving from `/` to the address its first message created stays the same page, so the
  // message box keeps the keyboard focus and the answer in flight its elements.
  const chat = useRef({ key: "new-0", id: null as string | null, news: 0 });
  if (route.page === "chat" && route.conversationId !== chat.current.id) {
    const { id, news } = chat.current;
    const adopted = id === null && route.conversationId !== null && isAdopted();
    const fresh = route.conversationId ?? `new-${news + 1}`; // each new chat a page of its own
    chat.current = {
      key: adopted ? chat.current.key : fresh,
      id: route.conversationId,
      news: route.conversationId === null ? news + 1 : news,
    };
  }

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const shortcut = SHORTCUTS.find((s) => s.matches(event));
      if (!shortcut) return;
      event.preventDefault();
      if (shortcut.action === "new-chat") navigate("/");
      if (shortcut.action === "help") setHelp(true);
      if (shortcut.action === "search") {
        setMenu(true);
        window.setTimeout(() => search.current?.focus(), 0);
      }
      if (shortcut.action === "focus-composer") {
        if (routeOf(window.location.pathname).page !== "chat") navigate("/");
        window.setTimeout(() => document.getElementById("composer")?.focus(), 0);
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const page = (() => {
    switch (route.page) {
      case "chat":
        return <ChatPage key={chat.current.key} conversationId={route.conversationId} />;
      case "memories":
        return <MemoriesPage />;
      case "devices":
        return <DevicesPage />;
      case "admin":
        if (me.isLoading) return <main className="page" id="main" />;
        return isAdmin ? (
          <AdminPage section={route.section} />
        ) : (
          <main className="page" id="main">
            <h1>Not available</h1>
            <p>This page is for admins.</p>
          </main>
        );
      default:
        return (
          <main className="page" id="main">
            <h1>Not found</h1>
            <p>
              <a href="/" onClick={onLinkClick}>
                Start a new chat
              </a>
            </p>
          </main>
        );
    }
  })();

  return (
    <div className={`shell${menu ? " menu-open" : ""}`}>
      <a href="#main" className="skip">
        Skip to content
      </a>
      <header className="topbar">
        <button
          type="button"
          className="icon menu-button"
          aria-label="Conversations"
          aria-expanded={menu}
          aria-controls="sidebar"
          onClick={() => setMenu(!menu)}
        >
          <Icon name="menu" />
        </button>
        <a href="/" className="brand" onClick={onLinkClick}>
          search2o
        </a>
        <nav aria-label="Pages" className="pages">
          <a href="/memories" aria-current={route.page === "memories" ? "page" : undefined} onClick={onLinkClick}>
            Memories
          </a>
          <a href="/devices" aria-current={route.page === "devices" ? "page" : undefined} onClick={onLinkClick}>
            Devices
          </a>
          {isAdmin ? (
            <a href="/admin/documents" aria-current={route.page === "admin" ? "page" : undefined} onClick={onLinkClick}>
              Admin
            </a>
          ) : null}
          <button type="button" className="icon" aria-label="Keyboard shortcuts" onClick={() => setHelp(true)}>
            ?
          </button>
          {session?.signed_in ? (
            <span className="who fold-narrow" dir="auto" title={session.email ?? undefined}>
              {session.name}
            </span>
          ) : null}
          {session?.signed_in && !session.methods.includes("local") ? (
            <button type="button" onClick={() => void signOut()}>
              Sign out
            </button>
          ) : null}
        </nav>
      </header>
      <div id="sidebar" className="sidebar-wrap">
        <Sidebar
          ref={search}
          activeId={route.page === "chat" ? route.conversationId : null}
          onNavigate={() => setMenu(false)}
        />
      </div>
      {page}
      <Dialog title="Keyboard shortcuts" open={help} onClose={() => setHelp(false)}>
        <dl className="shortcuts">
          {SHORTCUTS.map((s) => (
            <div key={s.action}>
              <dt>
                <kbd>{s.keys}</kbd>
              </dt>
              <dd>{s.label}</dd>
            </div>
          ))}
        </dl>
      </Dialog>
    </div>
  );
}
