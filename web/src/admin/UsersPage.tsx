// Admin: users and their groups (read-only here; `search2o users` changes them).
import { useQuery } from "@tanstack/react-query";
import { api, type Schemas } from "../api/client";
import { keys } from "../api/queries";

export function UsersPage() {
  const users = useQuery({ queryKey: keys.users, queryFn: () => api<Schemas["UserListPublic"]>("/v1/users") });
  const groups = [...new Set((users.data?.users ?? []).flatMap((u) => u.groups))].sort();
  return (
    <section>
      <h2>Users and groups</h2>
      <p className="muted">
        Add, change or remove users with <code>search2o users</code> on the server.
      </p>
      {users.isError ? <p role="alert">{(users.error as Error).message}</p> : null}
      <table>
        <caption className="visually-hidden">Users</caption>
        <thead>
          <tr>
            <th scope="col">Email</th>
            <th scope="col">Groups</th>
            <th scope="col">Admin</th>
            <th scope="col">Plan</th>
          </tr>
        </thead>
        <tbody>
          {(users.data?.users ?? []).map((u) => (
            <tr key={u.email}>
              <td>{u.email}</td>
              <td>{u.groups.join(", ") || "—"}</td>
              <td>{u.is_admin ? "yes" : "no"}</td>
              <td>{u.plan}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Groups</h3>
      <p>{groups.length ? groups.join(", ") : "No groups yet."}</p>
    </section>
  );
}
