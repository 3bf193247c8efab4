// Admin: users and their groups — add, change groups/admin/plan inline, remove with a confirm.
// A change applies from the user's next request (a demoted admin's admin pages go at once).
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import { api, type Schemas } from "../api/client";
import { keys, useMe } from "../api/queries";
import { Dialog } from "../ui/Dialog";

type User = Schemas["UserPublic"];
type Plan = NonNullable<Schemas["UserCreate"]["plan"]>;
const PLANS: Plan[] = ["free", "paid"];

/** "hr, eng" → ["hr", "eng"]; the server checks each name and drops repeats. */
function groupsOf(text: string): string[] {
  return text
    .split(",")
    .map((g) => g.trim())
    .filter(Boolean);
}

function path(email: string): string {
  return `/v1/users/${encodeURIComponent(email)}`;
}

export function UsersPage() {
  const users = useQuery({ queryKey: keys.users, queryFn: () => api<Schemas["UserListPublic"]>("/v1/users") });
  const [editing, setEditing] = useState<string | null>(null);
  const [removing, setRemoving] = useState<string | null>(null);
  const groups = [...new Set((users.data?.users ?? []).flatMap((u) => u.groups))].sort();
  return (
    <section>
      <h2>Users and groups</h2>
      <p className="muted">
        New users sign in with the company's identity provider, or with a link from{" "}
        <code>search2o users login-link EMAIL</code>.
      </p>
      <AddUser />
      {users.isError ? <p role="alert">{(users.error as Error).message}</p> : null}
      <table>
        <caption className="visually-hidden">Users</caption>
        <thead>
          <tr>
            <th scope="col">Email</th>
            <th scope="col">Groups</th>
            <th scope="col">Admin</th>
            <th scope="col">Plan</th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {(users.data?.users ?? []).map((u) =>
            editing === u.email ? (
              <EditRow key={u.email} user={u} onDone={() => setEditing(null)} />
            ) : (
              <tr key={u.email}>
                <td>{u.email}</td>
                <td>{u.groups.join(", ") || "—"}</td>
                <td>{u.is_admin ? "yes" : "no"}</td>
                <td>{u.plan}</td>
                <td>
                  <div className="buttons">
                    <button type="button" className="link" aria-label={`Edit ${u.email}`} onClick={() => setEditing(u.email)}>
                      Edit
                    </button>
                    <button type="button" className="link" aria-label={`Remove ${u.email}`} onClick={() => setRemoving(u.email)}>
                      Remove
                    </button>
                  </div>
                </td>
              </tr>
            ),
          )}
        </tbody>
      </table>
      <h3>Groups</h3>
      <p>{groups.length ? groups.join(", ") : "No groups yet."}</p>
      <RemoveDialog email={removing} onClose={() => setRemoving(null)} />
    </section>
  );
}

/** After a change: the list again, and who I am (I may have changed myself). */
function useRefresh() {
  const queryClient = useQueryClient();
  return () => {
    void queryClient.invalidateQueries({ queryKey: keys.users });
    void queryClient.invalidateQueries({ queryKey: keys.me });
  };
}

function AddUser() {
  const id = useId();
  const refresh = useRefresh();
  const [email, setEmail] = useState("");
  const [groups, setGroups] = useState("");
  const [admin, setAdmin] = useState(false);
  const [plan, setPlan] = useState<Plan>("free");
  const add = useMutation({
    mutationFn: () =>
      api<User>("/v1/users", {
        method: "POST",
        json: { email, groups: groupsOf(groups), is_admin: admin, plan } satisfies Schemas["UserCreate"],
      }),
    onSuccess: () => {
      setEmail("");
      setGroups("");
      setAdmin(false);
      setPlan("free");
      refresh();
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate();
  };
  return (
    <form className="toolbar" aria-label="Add a user" onSubmit={submit}>
      <label htmlFor={`${id}-email`}>Email</label>
      <input id={`${id}-email`} type="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
      <label htmlFor={`${id}-groups`}>Groups</label>
      <input id={`${id}-groups`} placeholder="hr, eng" value={groups} onChange={(e) => setGroups(e.target.value)} />
      <label>
        <input type="checkbox" checked={admin} onChange={(e) => setAdmin(e.target.checked)} /> Admin
      </label>
      <label htmlFor={`${id}-plan`}>Plan</label>
      <select id={`${id}-plan`} value={plan} onChange={(e) => setPlan(e.target.value as Plan)}>
        {PLANS.map((p) => (
          <option key={p}>{p}</option>
        ))}
      </select>
      <button type="submit" disabled={add.isPending}>
        Add user
      </button>
      {add.isError ? <span role="alert">{(add.error as Error).message}</span> : null}
      {add.isSuccess ? <span role="status">Added {add.data.email}</span> : null}
    </form>
  );
}

function EditRow({ user, onDone }: { user: User; onDone: () => void }) {
  const refresh = useRefresh();
  const [groups, setGroups] = useState(user.groups.join(", "));
  const [admin, setAdmin] = useState(user.is_admin);
  const [plan, setPlan] = useState<Plan>(user.plan as Plan);
  const save = useMutation({
    mutationFn: () =>
      api<User>(path(user.email), {
        method: "PATCH",
        json: { groups: groupsOf(groups), is_admin: admin, plan } satisfies Schemas["UserPatch"],
      }),
    onSuccess: () => {
      refresh();
      onDone();
    },
  });
  return (
    <tr className="editing">
      <td>{user.email}</td>
      <td>
        <input aria-label={`Groups of ${user.email}`} autoFocus value={groups} onChange={(e) => setGroups(e.target.value)} />
      </td>
      <td>
        <input type="checkbox" aria-label={`${user.email} is an admin`} checked={admin} onChange={(e) => setAdmin(e.target.checked)} />
      </td>
      <td>
        <select aria-label={`Plan of ${user.email}`} value={plan} onChange={(e) => setPlan(e.target.value as Plan)}>
          {PLANS.map((p) => (
            <option key={p}>{p}</option>
          ))}
        </select>
      </td>
      <td
        onKeyDown={(e) => {
          if (e.key === "Escape") onDone();
        }}
      >
        <div className="buttons">
          <button type="button" className="primary" disabled={save.isPending} onClick={() => save.mutate()}>
            Save
          </button>
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        </div>
        {save.isError ? <span role="alert">{(save.error as Error).message}</span> : null}
      </td>
    </tr>
  );
}

function RemoveDialog({ email, onClose }: { email: string | null; onClose: () => void }) {
  const refresh = useRefresh();
  const me = useMe();
  const remove = useMutation({
    mutationFn: (who: string) => api<void>(path(who), { method: "DELETE" }),
    onSuccess: () => {
      refresh();
      onClose();
    },
  });
  const close = () => {
    remove.reset();
    onClose();
  };
  return (
    <Dialog title="Remove user" open={email !== null} onClose={close}>
      <p>
        Remove <strong>{email}</strong>? Their conversations, memories, API tokens and browser sessions are deleted, and
        they are signed out at once.
        {email === me.data?.email ? " This is you: you will be signed out." : ""}
      </p>
      {remove.isError ? <p role="alert">{(remove.error as Error).message}</p> : null}
      <div className="buttons">
          <button type="button" className="stop" disabled={remove.isPending} onClick={() => email && remove.mutate(email)}>
            Remove
          </button>
          <button type="button" onClick={close}>
            Cancel
          </button>
      </div>
    </Dialog>
  );
}
