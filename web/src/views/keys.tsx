import { useState } from "preact/hooks";
import { api, type Key } from "../api";
import { Confirm, ErrorNote, useList } from "../components";
import { time } from "../util";

export function Keys() {
  const { list, error, act } = useList<Key>("keys");
  const [name, setName] = useState("");
  const [created, setCreated] = useState<Key | null>(null);
  const [revoke, setRevoke] = useState<Key | null>(null);
  const create = () =>
    act(async () => {
      setCreated(await api.post<Key>("keys", { name: name.trim() }));
      setName("");
    });
  const doRevoke = (k: Key) => {
    setRevoke(null);
    act(() => api.del(`keys/${k.id}`));
  };
  return (
    <section>
      <h1>API keys</h1>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          create();
        }}
      >
        <label for="key-name">Name</label>
        <input id="key-name" value={name} maxLength={100} placeholder="e.g. ci" onInput={(e) => setName(e.currentTarget.value)} />
        <button type="submit" class="primary">
          Create key
        </button>
      </form>
      <ErrorNote error={error} />
      {created?.key && (
        <div class="notice" role="status">
          <p>
            New key <b>{created.name || created.id}</b>. Copy it now: it is not shown again.
          </p>
          <input class="mono secret" readOnly value={created.key} aria-label="New API key" onFocus={(e) => e.currentTarget.select()} />
          <button type="button" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      {list && list.length === 0 && <p class="empty">This team has no stored keys.</p>}
      {list && list.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th>ID</th>
              <th>Name</th>
              <th>Key</th>
              <th>Created</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((k) => (
              <tr key={k.id}>
                <td data-label="ID" class="mono">
                  {k.id}
                </td>
                <td data-label="Name">{k.name}</td>
                <td data-label="Key" class="mono">
                  {k.mask}
                </td>
                <td data-label="Created">{time(k.createdAt)}</td>
                <td>
                  <button type="button" class="danger small" onClick={() => setRevoke(k)}>
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {revoke && (
        <Confirm title="Revoke this key?" confirm="Revoke" danger onConfirm={() => doRevoke(revoke)} onCancel={() => setRevoke(null)}>
          <p>
            Clients using <span class="mono">{revoke.mask}</span> are refused from now on.
          </p>
        </Confirm>
      )}
    </section>
  );
}
