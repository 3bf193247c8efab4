// The side panel's shell: the Web App's conversation list and chat page, plus "use this page"
// and the selection draft the context menu leaves.
import { useEffect, useState } from "react";
import type { Schemas } from "@web/api/client";
import { useMe } from "@web/api/queries";
import { ChatPage } from "@web/chat/ChatPage";
import { navigate, routeOf, usePath } from "@web/router";
import { Sidebar } from "@web/sidebar/Sidebar";
import { Icon } from "@web/ui/icons";
import { PagePreview } from "./PagePreview";
import { DRAFT_KEY } from "./settings";

// The Composer's draft of a new conversation (web/src/chat/Composer.tsx).
const NEW_DRAFT = "search2o.draft.new";

export function Panel() {
  const route = routeOf(usePath());
  const me = useMe();
  const [menu, setMenu] = useState(false);
  const [page, setPage] = useState<Schemas["PageContext"] | null>(null);
  const [fresh, setFresh] = useState(0);
  const conversationId = route.page === "chat" ? route.conversationId : null;

  // The context menu stores the selection in session storage: it becomes a new chat's draft.
  useEffect(() => {
    const take = async () => {
      const found = await chrome.storage.session.get(DRAFT_KEY);
      const text = found[DRAFT_KEY];
      if (typeof text !== "string" || !text) return;
      await chrome.storage.session.remove(DRAFT_KEY);
      localStorage.setItem(NEW_DRAFT, text);
      navigate("/");
      setFresh((n) => n + 1);
    };
    void take();
    const listener = (changes: Record<string, chrome.storage.StorageChange>, area: string) => {
      if (area === "session" && changes[DRAFT_KEY]?.newValue) void take();
    };
    chrome.storage.onChanged.addListener(listener);
    return () => chrome.storage.onChanged.removeListener(listener);
  }, []);

  return (
    <div className={`shell panel${menu ? " menu-open" : ""}`}>
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
        <span className="brand">search2o</span>
        <span className="muted who">{me.data?.email ?? ""}</span>
      </header>
      <div id="sidebar" className="sidebar-wrap">
        <Sidebar activeId={conversationId} onNavigate={() => setMenu(false)} />
      </div>
      <div className="panel-main">
        <ChatPage
          key={`${conversationId ?? "new"}-${fresh}`}
          conversationId={conversationId}
          page={page}
          onPageSent={() => setPage(null)}
        />
        <PagePreview page={page} onChange={setPage} />
      </div>
    </div>
  );
}
