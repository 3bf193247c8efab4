// The admin pages, shown to admins only (the API refuses everyone else anyway).
import { ADMIN_SECTIONS, onLinkClick, type AdminSection } from "../router";
import { AgentsPage } from "./AgentsPage";
import { DocumentsPage } from "./DocumentsPage";
import { FeedbackPage } from "./FeedbackPage";
import { SettingsPage } from "./SettingsPage";
import { UsersPage } from "./UsersPage";

const TITLES: Record<AdminSection, string> = {
  documents: "Documents",
  agents: "Agents",
  users: "Users",
  feedback: "Feedback",
  settings: "Settings",
};

export function AdminPage({ section }: { section: AdminSection }) {
  return (
    <main className="page" id="main">
      <h1>Administration</h1>
      <nav aria-label="Administration" className="tabs">
        {ADMIN_SECTIONS.map((s) => (
          <a key={s} href={`/admin/${s}`} aria-current={s === section ? "page" : undefined} onClick={onLinkClick}>
            {TITLES[s]}
          </a>
        ))}
      </nav>
      {section === "documents" ? <DocumentsPage /> : null}
      {section === "agents" ? <AgentsPage /> : null}
      {section === "users" ? <UsersPage /> : null}
      {section === "feedback" ? <FeedbackPage /> : null}
      {section === "settings" ? <SettingsPage /> : null}
    </main>
  );
}
