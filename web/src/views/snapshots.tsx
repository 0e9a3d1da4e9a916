import { useState } from "preact/hooks";
import { api, type Snapshot } from "../api";
import { Confirm, ErrorNote, Link, useList } from "../components";
import { time } from "../util";

export function Snapshots() {
  const { list, error, act } = useList<Snapshot>("snapshots");
  const [del, setDel] = useState<string | null>(null);
  const remove = (id: string) => {
    setDel(null);
    act(() => api.del(`snapshots/${id}`));
  };
  return (
    <section>
      <h1>Snapshots</h1>
      <ErrorNote error={error} />
      {list === null ? (
        <p class="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p class="empty">No snapshots. A sandbox's Snapshot action, or the SDK's createSnapshot, makes one.</p>
      ) : (
        <table class="list">
          <thead>
            <tr>
              <th>Snapshot</th>
              <th>Name</th>
              <th>From sandbox</th>
              <th>Taken</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((s) => (
              <tr key={s.snapshotId}>
                <td data-label="Snapshot" class="mono">
                  {s.snapshotId}
                </td>
                <td data-label="Name">{s.name}</td>
                <td data-label="From sandbox">
                  <Link to={"sandboxes/" + s.sandboxId} class="mono">
                    {s.sandboxId}
                  </Link>
                </td>
                <td data-label="Taken">{time(s.createdAt)}</td>
                <td>
                  <button type="button" class="danger small" onClick={() => setDel(s.snapshotId)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {del && (
        <Confirm title="Delete this snapshot?" confirm="Delete" danger onConfirm={() => remove(del)} onCancel={() => setDel(null)}>
          <p>
            Sandboxes can no longer be created from <span class="mono">{del}</span>.
          </p>
        </Confirm>
      )}
    </section>
  );
}
