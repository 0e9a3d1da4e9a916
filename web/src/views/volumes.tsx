import { useState } from "preact/hooks";
import { api, type Volume } from "../api";
import { Confirm, ErrorNote, Link, useList } from "../components";
import { bytes, time } from "../util";

// Volumes lists the team's volumes with what each holds (from its own
// filesystem, which E2B's API does not report) and the sandboxes that
// mount it; it creates and deletes them as the SDK's Volume does.
export function Volumes() {
  const { list, error, act } = useList<Volume>("volumes", 5000);
  const [name, setName] = useState("");
  const [del, setDel] = useState<Volume | null>(null);
  return (
    <section>
      <h1>Volumes</h1>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            await api.post("volumes", { name: name.trim() });
            setName("");
          });
        }}
      >
        <label for="volume-name">Name</label>
        <input id="volume-name" value={name} maxLength={128} placeholder="e.g. workspace" onInput={(e) => setName(e.currentTarget.value)} />
        <button type="submit" class="primary">
          Create volume
        </button>
      </form>
      <ErrorNote error={error} />
      {list === null ? (
        <p class="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p class="empty">No volumes. Create one here or with the SDK's Volume.create, and mount it with volumeMounts.</p>
      ) : (
        <table class="list">
          <thead>
            <tr>
              <th>Volume</th>
              <th>Name</th>
              <th>Used</th>
              <th>Mounted by</th>
              <th>Created</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((v) => (
              <tr key={v.volumeId} data-id={v.volumeId}>
                <td data-label="Volume" class="mono">
                  {v.volumeId}
                </td>
                <td data-label="Name">{v.name}</td>
                <td data-label="Used">
                  <Usage v={v} />
                </td>
                <td data-label="Mounted by">
                  {v.mountedBy.length === 0 ? (
                    <span class="muted">none</span>
                  ) : (
                    v.mountedBy.map((m) => (
                      <div key={m.sandboxId + m.path}>
                        <Link to={"sandboxes/" + m.sandboxId} class="mono">
                          {m.sandboxId}
                        </Link>{" "}
                        <span class="muted mono">{m.path}</span>
                      </div>
                    ))
                  )}
                </td>
                <td data-label="Created">{time(v.createdAt)}</td>
                <td>
                  <button type="button" class="danger small" onClick={() => setDel(v)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {del && (
        <Confirm
          title="Delete this volume?"
          confirm="Delete"
          danger
          onConfirm={() => {
            const v = del;
            setDel(null);
            act(() => api.del(`volumes/${v.volumeId}`));
          }}
          onCancel={() => setDel(null)}
        >
          <p>
            Everything in <b>{del.name}</b> (<span class="mono">{del.volumeId}</span>) is removed. A volume that a sandbox mounts is
            not deleted: kill the sandbox first.
          </p>
        </Confirm>
      )}
    </section>
  );
}

function Usage(props: { v: Volume }) {
  const { usedBytes, limitBytes } = props.v;
  if (!limitBytes) return <span title="no size limit">{bytes(usedBytes)}</span>;
  const pct = Math.min(100, Math.round((usedBytes / limitBytes) * 100));
  return (
    <div class="progress">
      <progress max={100} value={pct} aria-label={`${props.v.name} used`} />
      <span class="muted">
        {bytes(usedBytes)} of {bytes(limitBytes)}
      </span>
    </div>
  );
}
