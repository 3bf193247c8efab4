// The service worker: the toolbar button opens the side panel; the context menu item "Ask
// search2o about the selection" opens it with the selection as the message draft.
import { DRAFT_KEY } from "./settings";

const MENU_ID = "search2o-ask-selection";
// A draft longer than a message may be is cut; the server's limit is chat.max_message_chars.
const MAX_DRAFT_CHARS = 8000;

chrome.runtime.onInstalled.addListener(() => {
  chrome.contextMenus.create({
    id: MENU_ID,
    title: "Ask search2o about the selection",
    contexts: ["selection"],
  });
  void chrome.sidePanel.setPanelBehavior({ openPanelOnActionClick: true });
});

chrome.contextMenus.onClicked.addListener((info, tab) => {
  if (info.menuItemId !== MENU_ID || tab?.windowId === undefined) return;
  // sidePanel.open must be called in the click's user gesture: before anything is awaited.
  void chrome.sidePanel.open({ windowId: tab.windowId });
  const selection = (info.selectionText ?? "").slice(0, MAX_DRAFT_CHARS);
  void chrome.storage.session.set({ [DRAFT_KEY]: selection });
});
