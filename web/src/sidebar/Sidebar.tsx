// The conversation list: searched by title, grouped by date, pinned first, paged by cursor and
// virtualised (only the rows in view exist in the page, so 10,000 conversations stay smooth).
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useVirtualizer } from "@tanstack/react-virtual";
import { forwardRef, useEffect, useMemo, useRef, useState } from "react";
import { api, type Schemas } from "../api/client";
import { keys, useConversationPages, type PagedConversation } from "../api/queries";
import { navigate, onLinkClick } from "../router";
import { Icon } from "../ui/icons";
import { expiresIn, rowsOf } from "./groups";

const UNDO_MS = 6000;

interface Props {
  activeId: string | null;
  onNavigate: () => void;
}

export const Sidebar = forwardRef<HTMLInputElement, Props>(function Sidebar({ activeId, onNavigate }, searchRef) {
  const [typed, setTyped] = useState("");
  const [query, setQuery] = useState("");
  const [hidden, setHidden] = useState<ReadonlySet<string>>(new Set());
  const [undo, setUndo] = useState<{ id: string; title: string } | null>(null);
  const timers = useRef(new Map<string, number>());
  const queryClient = useQueryClient();
  const pages = useConversationPages(query);

  useEffect(() => {
    const timer = window.setTimeout(() => setQuery(typed.trim()), 250);
    return () => window.clearTimeout(timer);
  }, [typed]);

  const conversations = useMemo(
    () => (pages.data?.pages ?? []).flatMap((p) => p.conversations).filter((c) => !hidden.has(c.id)),
    [pages.data, hidden],
  );
  const rows = useMemo(() => rowsOf(conversations, new Date()), [conversations]);

  const parent = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => parent.current,
    estimateSize: (index) => (rows[index]?.kind === "header" ? 30 : 48),
    overscan: 8,
  });
  const items = virtualizer.getVirtualItems();
  const lastIndex = items.length ? (items[items.length - 1]?.index ?? 0) : 0;
  useEffect(() => {
    if (pages.hasNextPage && !pages.isFetchingNextPage && lastIndex >= rows.length - 10) {
      void pages.fetchNextPage();
    }
  }, [lastIndex, rows.length, pages]);

  const refresh = () => queryClient.invalidateQueries({ queryKey: keys.allConversations });

  const patch = useMutation({
    mutationFn: ({ id, body }: { id: string; body: Schemas["ConversationPatch"] }) =>
      api<Schemas["ConversationPublic"]>(`/v1/conversations/${id}`, { method: "PATCH", json: body }),
    onSuccess: (_saved, { id }) => {
      void refresh();
      void queryClient.invalidateQueries({ queryKey: keys.conversation(id) });
    },
  });

  const remove = (conversation: PagedConversation) => {
    setHidden((set) => new Set([...set, conversation.id]));
    setUndo({ id: conversation.id, title: conversation.title });
    const timer = window.setTimeout(() => {
      timers.current.delete(conversation.id);
      void api(`/v1/conversations/${conversation.id}`, { method: "DELETE" }).finally(() => {
        void refresh();
        setUndo((u) => (u?.id === conversation.id ? null : u));
      });
    }, UNDO_MS);
    timers.current.set(conversation.id, timer);
    if (conversation.id === activeId) navigate("/");
  };

  const restore = (id: string) => {
    window.clearTimeout(timers.current.get(id));
    timers.current.delete(id);
    setHidden((set) => new Set([...set].filter((x) => x !== id)));
    setUndo(null);
  };

  const now = new Date();
  return (
    <nav className="sidebar" aria-label="Conversations">
      <a href="/" className="button primary new-chat" onClick={(e) => { onLinkClick(e); onNavigate(); }}>
        New chat
      </a>
      <div className="search">
        <label htmlFor="conversation-search" className="visually-hidden">
          Search conversations
        </label>
        <input
          id="conversation-search"
          ref={searchRef}
          type="search"
          placeholder="Search conversations"
          value={typed}
          dir="auto"
          onChange={(event) => setTyped(event.target.value)}
        />
      </div>
      <div className="conversation-list" ref={parent} data-testid="conversation-list">
        {pages.isError ? <p role="alert">{(pages.error as Error).message}</p> : null}
        {pages.isSuccess && rows.length === 0 && !pages.hasNextPage ? (
          <p className="muted">{query ? "No conversation has that in its title." : "No conversations yet."}</p>
        ) : null}
        <ul style={{ height: virtualizer.getTotalSize() }} className="virtual">
          {items.map((item) => {
            const row = rows[item.index];
            if (!row) return null;
            const style = { transform: `translateY(${item.start}px)` };
            if (row.kind === "header") {
              return (
                <li key={`h-${row.label}`} className="group-header" style={style} data-index={item.index} ref={virtualizer.measureElement}>
                  {row.label}
                </li>
              );
            }
            return (
              <li key={row.conversation.id} style={style} data-index={item.index} ref={virtualizer.measureElement}>
                <ConversationRow
                  conversation={row.conversation}
                  active={row.conversation.id === activeId}
                  expiry={expiresIn(row.conversation.expires_at, now)}
                  onOpen={onNavigate}
                  onRename={(title) => patch.mutate({ id: row.conversation.id, body: { title } })}
                  onPin={() => patch.mutate({ id: row.conversation.id, body: { pinned: !row.conversation.pinned } })}
                  onDelete={() => remove(row.conversation)}
                />
              </li>
            );
          })}
        </ul>
        {pages.isFetching ? <p className="muted loading">Loading…</p> : null}
      </div>
      {patch.isError ? <p role="alert">{(patch.error as Error).message}</p> : null}
      {undo ? (
        <div className="toast" role="status">
          Deleted “<span dir="auto">{undo.title}</span>”.{" "}
          <button type="button" className="link" onClick={() => restore(undo.id)}>
            Undo
          </button>
        </div>
      ) : null}
    </nav>
  );
});

interface RowProps {
  conversation: PagedConversation;
  active: boolean;
  expiry: string | null;
  onOpen: () => void;
  onRename: (title: string) => void;
  onPin: () => void;
  onDelete: () => void;
}

function ConversationRow({ conversation, active, expiry, onOpen, onRename, onPin, onDelete }: RowProps) {
  const [editing, setEditing] = useState(false);
  const [title, setTitle] = useState(conversation.title);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (editing) input.current?.select();
  }, [editing]);

  if (editing) {
    const finish = (save: boolean) => {
      setEditing(false);
      const clean = title.trim();
      if (save && clean && clean !== conversation.title) onRename(clean);
      else setTitle(conversation.title);
    };
    return (
      <div className="row editing">
        <label className="visually-hidden" htmlFor={`rename-${conversation.id}`}>
          New title
        </label>
        <input
          id={`rename-${conversation.id}`}
          ref={input}
          value={title}
          maxLength={200}
          dir="auto"
          onChange={(event) => setTitle(event.target.value)}
          onBlur={() => finish(true)}
          onKeyDown={(event) => {
            if (event.key === "Enter") finish(true);
            if (event.key === "Escape") finish(false);
          }}
        />
      </div>
    );
  }
  return (
    <div className={`row${active ? " active" : ""}`}>
      <a
        href={`/c/${conversation.id}`}
        aria-current={active ? "page" : undefined}
        onClick={(event) => {
          onLinkClick(event);
          onOpen();
        }}
      >
        <span className="title" dir="auto">
          {conversation.pinned ? <span className="visually-hidden">Pinned: </span> : null}
          {conversation.title}
        </span>
        {expiry ? <span className="expiry muted">{expiry}</span> : null}
      </a>
      <span className="row-actions">
        <button type="button" className="icon" aria-label={`Rename “${conversation.title}”`} onClick={() => setEditing(true)}>
          <Icon name="edit" />
        </button>
        <button
          type="button"
          className="icon"
          aria-label={`${conversation.pinned ? "Unpin" : "Pin"} “${conversation.title}”`}
          aria-pressed={conversation.pinned}
          onClick={onPin}
        >
          <Icon name="pin" filled={conversation.pinned} />
        </button>
        <button type="button" className="icon" aria-label={`Delete “${conversation.title}”`} onClick={onDelete}>
          <Icon name="trash" />
        </button>
      </span>
    </div>
  );
}
