// What "use this page" reads from the active tab. `readPage` runs inside the page
// (chrome.scripting.executeScript serialises the function, so it must use nothing from outside)
// and returns text only: the extension never sends the page's HTML, and never runs anything
// the page provides.

export interface PageText {
  url: string;
  title: string;
  text: string;
}

/** Most characters taken from a page (the server's default `chat.max_page_chars`). */
export const MAX_PAGE_CHARS = 20000;

export function readPage(maxChars: number): PageText {
  // The page's main content when it marks one; else the whole body. innerText is the text as
  // rendered: no script or style content, nothing hidden.
  const root =
    document.querySelector("main, article, [role='main']") ?? document.body ?? document.documentElement;
  const raw = root instanceof HTMLElement ? root.innerText : (root?.textContent ?? "");
  const text = raw
    .replace(/\r\n?/g, "\n")
    .replace(/[ \t\u00a0]+/g, " ")
    .replace(/\n\s*\n\s*\n+/g, "\n\n")
    .trim()
    .slice(0, maxChars);
  return { url: location.href, title: document.title, text };
}

/** Read the readable text of a tab (needs activeTab, or a host permission for its origin). */
export async function readTab(tabId: number): Promise<PageText> {
  const [result] = await chrome.scripting.executeScript({
    target: { tabId },
    func: readPage,
    args: [MAX_PAGE_CHARS],
  });
  const value = result?.result as PageText | undefined;
  if (!value) throw new Error("the page gave no text");
  return value;
}

/** The tab the user is looking at in this window (the side panel itself is no tab). */
export async function activeTab(): Promise<chrome.tabs.Tab | null> {
  const own = chrome.runtime.getURL("");
  const tabs = await chrome.tabs.query({ active: true, currentWindow: true });
  return tabs.find((tab) => tab.id !== undefined && !(tab.url ?? "").startsWith(own)) ?? null;
}
