import { useEffect, useState } from "preact/hooks";
import { api, type ServerView } from "../api";
import { ErrorNote } from "../components";
import { bytes } from "../util";

export function Server() {
  const [s, setS] = useState<ServerView | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () => api.get<ServerView>("server").then(setS, (e) => setError(e.message));
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, []);
  return (
    <section>
      <h1>Server</h1>
      <ErrorNote error={error} />
      {s && (
        <>
          <dl class="facts">
            <dt>Version</dt>
            <dd class="mono">{s.version}</dd>
            <dt>Engine</dt>
            <dd>{s.engine}</dd>
            <dt>Runtime</dt>
            <dd>{s.runtime}</dd>
            <dt>Firewall</dt>
            <dd>{s.firewall}</dd>
            <dt>Sandbox domain</dt>
            <dd class="mono">{s.domain}</dd>
            <dt>State directory</dt>
            <dd class="mono">{s.stateDir}</dd>
            <dt>Defaults</dt>
            <dd>
              {s.defaultCpuCount} CPU · {s.defaultMemoryMB} MiB · timeout up to {Math.round(s.maxTimeoutSec / 3600)} h
            </dd>
            <dt>Sandboxes</dt>
            <dd>
              {s.running} running
              {Object.entries(s.paused).map(([m, n]) => ` · ${n} paused (${m})`)}
            </dd>
            <dt>Checkpoint disk</dt>
            <dd>{s.checkpointError ? <span class="muted">{s.checkpointError}</span> : `${s.checkpoints} checkpoints · ${bytes(s.checkpointBytes)}`}</dd>
          </dl>
          <h2>Warm pools</h2>
          {Object.keys(s.poolSize).length === 0 ? (
            <p class="muted">No warm pool.</p>
          ) : (
            <table class="list">
              <thead>
                <tr>
                  <th>Template</th>
                  <th>Ready</th>
                  <th>Kept</th>
                </tr>
              </thead>
              <tbody>
                {Object.entries(s.poolSize).map(([t, n]) => (
                  <tr key={t}>
                    <td data-label="Template">{t}</td>
                    <td data-label="Ready">{s.poolReady[t] ?? 0}</td>
                    <td data-label="Kept">{n}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h2>Checks</h2>
          <ul class="checks">
            {s.checks.map((c) => (
              <li key={c.name} class={c.ok ? "ok" : c.warning ? "warn" : "fail"}>
                <span class="badge">{c.ok ? "ok" : c.warning ? "warn" : "fail"}</span> <b>{c.name}</b> <span>{c.message}</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
