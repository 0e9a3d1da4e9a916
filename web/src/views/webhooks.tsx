import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { Confirm, ErrorNote, useList } from "../components";
import { time } from "../util";

interface Webhook {
  id: string;
  name: string;
  url: string;
  enabled: boolean;
  events: string[];
  createdAt: string;
}

interface Delivery {
  id: string;
  eventId: string;
  sandboxId: string;
  status: string;
  attempts: number;
  nextAttempt?: string;
  lastStatus?: number;
  lastError?: string;
  createdAt: string;
  deliveredAt?: string;
}

const types = ["created", "updated", "paused", "resumed", "killed"];

// Webhooks are where the team's lifecycle events are posted, each with
// its delivery log.
export function Webhooks() {
  const { list, error, setError, act } = useList<Webhook>("webhooks");
  const [chosen, setChosen] = useState<string | null>(null);
  const [deliveries, setDeliveries] = useState<Delivery[]>([]);
  const [del, setDel] = useState<Webhook | null>(null);
  const [form, setForm] = useState({ name: "", url: "", secret: "", events: new Set(types) });

  useEffect(() => {
    if (!chosen) return;
    const f = () => api.get<Delivery[]>(`webhooks/${chosen}/deliveries`).then(setDeliveries, (e) => setError(e.message));
    f();
    const t = setInterval(f, 3000);
    return () => clearInterval(t);
  }, [chosen]);

  const create = () =>
    act(async () => {
      const w = await api.post<Webhook>("webhooks", {
        name: form.name,
        url: form.url,
        signatureSecret: form.secret,
        events: types.filter((t) => form.events.has(t)).map((t) => "sandbox.lifecycle." + t),
      });
      setForm({ name: "", url: "", secret: "", events: new Set(types) });
      setChosen(w.id);
    });

  return (
    <section>
      <h1>Webhooks</h1>
      <form
        class="webhook-form"
        onSubmit={(e) => {
          e.preventDefault();
          create();
        }}
      >
        <label for="wh-name">Name</label>
        <input id="wh-name" value={form.name} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} />
        <label for="wh-url">URL</label>
        <input id="wh-url" type="url" required placeholder="https://…" value={form.url} onInput={(e) => setForm({ ...form, url: e.currentTarget.value })} />
        <label for="wh-secret">Signature secret</label>
        <input id="wh-secret" type="password" required value={form.secret} onInput={(e) => setForm({ ...form, secret: e.currentTarget.value })} />
        <fieldset>
          <legend>Events</legend>
          {types.map((t) => (
            <label key={t} class="check">
              <input
                type="checkbox"
                checked={form.events.has(t)}
                onChange={(e) => {
                  const ev = new Set(form.events);
                  if (e.currentTarget.checked) ev.add(t);
                  else ev.delete(t);
                  setForm({ ...form, events: ev });
                }}
              />{" "}
              {t}
            </label>
          ))}
        </fieldset>
        <button type="submit" class="primary">
          Add webhook
        </button>
      </form>
      <ErrorNote error={error} />
      {list && list.length === 0 && <p class="empty">No webhooks: lifecycle events are kept, and posted nowhere.</p>}
      {list && list.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th>Name</th>
              <th>URL</th>
              <th>Events</th>
              <th>Enabled</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((w) => (
              <tr key={w.id} class={w.id === chosen ? "chosen" : ""}>
                <td data-label="Name">
                  <button type="button" class="linkish" onClick={() => setChosen(w.id)} aria-label={`Deliveries of ${w.name}`}>
                    {w.name}
                  </button>
                </td>
                <td data-label="URL" class="mono">
                  {w.url}
                </td>
                <td data-label="Events">{w.events.map((e) => e.replace("sandbox.lifecycle.", "")).join(", ")}</td>
                <td data-label="Enabled">
                  <input
                    type="checkbox"
                    aria-label={`${w.name} enabled`}
                    checked={w.enabled}
                    onChange={(e) => {
                      const enabled = e.currentTarget.checked;
                      act(() => api.post(`webhooks/${w.id}/enabled`, { enabled }));
                    }}
                  />
                </td>
                <td>
                  <button type="button" class="danger small" onClick={() => setDel(w)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {chosen && (
        <>
          <h2>Deliveries</h2>
          {deliveries.length === 0 ? (
            <p class="muted">None yet.</p>
          ) : (
            <table class="list deliveries">
              <thead>
                <tr>
                  <th>Created</th>
                  <th>Sandbox</th>
                  <th>Status</th>
                  <th>Attempts</th>
                  <th>Last answer</th>
                </tr>
              </thead>
              <tbody>
                {deliveries.map((d) => (
                  <tr key={d.id}>
                    <td data-label="Created">{time(d.createdAt)}</td>
                    <td data-label="Sandbox" class="mono">
                      {d.sandboxId}
                    </td>
                    <td data-label="Status">
                      <span class={"badge " + (d.status === "delivered" ? "ready" : d.status === "failed" ? "error" : "waiting")}>{d.status}</span>
                      {d.nextAttempt && <span class="muted"> next {time(d.nextAttempt)}</span>}
                    </td>
                    <td data-label="Attempts">{d.attempts}</td>
                    <td data-label="Last answer">{d.lastStatus ? `HTTP ${d.lastStatus}` : (d.lastError ?? "")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
      {del && (
        <Confirm
          title="Delete this webhook?"
          confirm="Delete"
          danger
          onConfirm={() => {
            const w = del;
            setDel(null);
            if (chosen === w.id) setChosen(null);
            act(() => api.del(`webhooks/${w.id}`));
          }}
          onCancel={() => setDel(null)}
        >
          <p>
            Events are no longer posted to <span class="mono">{del.url}</span>.
          </p>
        </Confirm>
      )}
    </section>
  );
}
