// Keyboard shortcuts, the one list the help dialog shows and the handler reads.
export interface Shortcut {
  keys: string;
  action: "new-chat" | "focus-composer" | "search" | "help";
  label: string;
  matches: (event: KeyboardEvent) => boolean;
}

const mod = (event: KeyboardEvent) => event.ctrlKey || event.metaKey;

export const SHORTCUTS: Shortcut[] = [
  {
    keys: "Ctrl+Shift+O",
    action: "new-chat",
    label: "New chat",
    matches: (e) => mod(e) && e.shiftKey && e.key.toLowerCase() === "o",
  },
  {
    keys: "Shift+Esc",
    action: "focus-composer",
    label: "Focus the message box",
    matches: (e) => e.shiftKey && e.key === "Escape",
  },
  {
    keys: "Ctrl+K",
    action: "search",
    label: "Search conversations",
    matches: (e) => mod(e) && !e.shiftKey && e.key.toLowerCase() === "k",
  },
  {
    keys: "Ctrl+/",
    action: "help",
    label: "Show keyboard shortcuts",
    matches: (e) => mod(e) && e.key === "/",
  },
];
