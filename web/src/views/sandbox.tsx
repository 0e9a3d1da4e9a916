import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, stream, type LifecycleEvent, type LogLine, type Metric, type Sandbox } from "../api";
import { Chart, Confirm, ErrorNote, Link, StateBadge, useNow } from "../components";
import { ago, bytes, duration, time } from "../util";
import { Terminal } from "./terminal";
import { Screen } from "./screen";
import { Files } from "./files";

type Action = "pause" | "resume" | "kill" | "timeout" | "snapshot";

// SandboxDetail is one sandbox: what it is, its actions, its metrics
// over its life, its log streaming live and its lifecycle events.
export function SandboxDetail(props: { id: string }) {
  const [sb, setSb] = useState<Sandbox | null>(null);
  const [gone, setGone] = useState(false);
  const [metrics, setMetrics] = useState<Metric[]>([]);
  const [events, setEvents] = useState<LifecycleEvent[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [asking, setAsking] = useState<Action | null>(null);
  const [minutes, setMinutes] = useState(5);
  const [snapName, setSnapName] = useState("");
  const [keepMemory, setKeepMemory] = useState(true);
  const [received, setReceived] = useState(Date.now());
  const now = useNow();

  const goneRef = useRef(false);
  const load = async () => {
    if (goneRef.current) return;
    try {
      setSb(await api.get<Sandbox>(`sandboxes/${props.id}`));
      setReceived(Date.now());
      setGone(false);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        goneRef.current = true;
        setGone(true);
        return;
      }
      setError(String(e instanceof Error ? e.message : e));
    }
    // Killed from this page while the sandbox was read: ask no more.
    if (goneRef.current) return;
    api.get<Metric[]>(`sandboxes/${props.id}/metrics`).then(setMetrics, () => {});
    api.get<LifecycleEvent[]>(`sandboxes/${props.id}/events`).then(setEvents, () => {});
  };

  useEffect(() => {
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, [props.id]);

  const run = async (a: Action) => {
    setAsking(null);
    setError(null);
    setNotice(null);
    try {
      switch (a) {
        case "timeout":
          await api.post(`sandboxes/${props.id}/timeout`, { seconds: minutes * 60 });
          setNotice(`Timeout extended by ${minutes} min.`);
          break;
        case "snapshot": {
          const sn = await api.post<{ snapshotId: string }>(`sandboxes/${props.id}/snapshot`, snapName ? { name: snapName } : {});
          setNotice(`Snapshot ${sn.snapshotId} taken.`);
          break;
        }
        case "kill":
          await api.post(`sandboxes/${props.id}/kill`);
          goneRef.current = true; // it is known to be gone: ask no more
          setGone(true);
          setNotice("Killed.");
          return;
        case "pause":
          await api.post(`sandboxes/${props.id}/pause`, { keepMemory });
          setNotice("Paused.");
          break;
        default:
          await api.post(`sandboxes/${props.id}/resume`);
          setNotice("Resumed.");
      }
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
    load();
  };

  const left = sb ? (sb.state === "running" ? sb.timeLeftMs - (now - received) : sb.timeLeftMs) : 0;
  const memMax = metrics.length ? metrics[metrics.length - 1].memTotal : 0;

  return (
    <section>
      <p class="crumbs">
        <Link to="">Sandboxes</Link> / <span class="mono">{props.id}</span>
      </p>
      <div class="title">
        <h1 class="mono">{props.id}</h1>
        {sb && !gone && <StateBadge state={sb.state} pauseMode={sb.pauseMode} />}
        {gone && <span class="badge killed">killed or gone</span>}
      </div>
      <ErrorNote error={error} />
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      {sb && !gone && (
        <>
          <dl class="facts">
            <dt>Template</dt>
            <dd>{sb.alias ? `${sb.alias} (${sb.templateId})` : sb.templateId}</dd>
            <dt>Runtime</dt>
            <dd>{sb.runtime}</dd>
            <dt>Resources</dt>
            <dd>
              {sb.cpuCount} CPU · {sb.memoryMB} MiB · {sb.diskSizeMB} MiB disk
            </dd>
            <dt>Started</dt>
            <dd>
              {time(sb.startedAt)} ({ago(sb.startedAt, now)} ago)
            </dd>
            <dt>Time left</dt>
            <dd>{duration(left)}</dd>
            <dt>Metadata</dt>
            <dd class="meta">
              {Object.keys(sb.metadata).length === 0 && <span class="muted">none</span>}
              {Object.entries(sb.metadata).map(([k, v]) => (
                <span class="tag" key={k}>
                  {k}={v}
                </span>
              ))}
            </dd>
          </dl>
          <div class="actions" role="group" aria-label="Actions">
            {sb.state === "running" && (
              <button type="button" onClick={() => setAsking("pause")}>
                Pause
              </button>
            )}
            {sb.state === "paused" && (
              <button type="button" onClick={() => setAsking("resume")}>
                Resume
              </button>
            )}
            {sb.state === "running" && (
              <button type="button" onClick={() => setAsking("timeout")}>
                Extend timeout
              </button>
            )}
            <button type="button" onClick={() => setAsking("snapshot")}>
              Snapshot
            </button>
            <button type="button" class="danger" onClick={() => setAsking("kill")}>
              Kill
            </button>
          </div>
        </>
      )}
      {asking === "pause" && (
        <Confirm title="Pause this sandbox?" confirm="Pause" onConfirm={() => run("pause")} onCancel={() => setAsking(null)}>
          <p>Its processes stop; a resume continues them.</p>
          <label class="check">
            <input type="checkbox" checked={keepMemory} onChange={(e) => setKeepMemory(e.currentTarget.checked)} /> Keep memory (else only its files are kept, and
            a resume restarts it)
          </label>
        </Confirm>
      )}
      {asking === "resume" && (
        <Confirm title="Resume this sandbox?" confirm="Resume" onConfirm={() => run("resume")} onCancel={() => setAsking(null)} />
      )}
      {asking === "kill" && (
        <Confirm title="Kill this sandbox?" confirm="Kill" danger onConfirm={() => run("kill")} onCancel={() => setAsking(null)}>
          <p>Its container and files are deleted. This cannot be undone.</p>
        </Confirm>
      )}
      {asking === "timeout" && (
        <Confirm title="Extend the timeout" confirm="Extend" onConfirm={() => run("timeout")} onCancel={() => setAsking(null)}>
          <label for="extend-min">Minutes to add</label>
          <input id="extend-min" type="number" min="1" max="1440" value={minutes} onInput={(e) => setMinutes(Math.max(1, Number(e.currentTarget.value) || 1))} />
        </Confirm>
      )}
      {asking === "snapshot" && (
        <Confirm title="Snapshot this sandbox?" confirm="Snapshot" onConfirm={() => run("snapshot")} onCancel={() => setAsking(null)}>
          <p>Its filesystem is saved as a template new sandboxes can start from.</p>
          <label for="snap-name">Name (optional)</label>
          <input id="snap-name" value={snapName} onInput={(e) => setSnapName(e.currentTarget.value)} />
        </Confirm>
      )}
      {sb && !gone && sb.state === "running" && (
        <>
          {(sb.templateId === "desktop" || sb.alias === "desktop") && (
            <>
              <h2>Screen</h2>
              <Screen id={props.id} />
            </>
          )}
          <h2>Terminal</h2>
          <Terminal id={props.id} />
          <h2>Files</h2>
          <Files id={props.id} />
        </>
      )}
      <h2>Metrics</h2>
      <div class="charts">
        <Chart title="CPU" points={metrics.map((m) => ({ t: Date.parse(m.timestamp), v: m.cpuUsedPct }))} max={100} format={(v) => `${v.toFixed(0)}%`} />
        <Chart title="Memory" points={metrics.map((m) => ({ t: Date.parse(m.timestamp), v: m.memUsed }))} max={memMax} format={bytes} />
        <Chart
          title="Disk"
          points={metrics.map((m) => ({ t: Date.parse(m.timestamp), v: m.diskUsed }))}
          max={metrics.length ? metrics[metrics.length - 1].diskTotal : 0}
          format={bytes}
        />
      </div>
      <h2>Logs</h2>
      <Logs path={`sandboxes/${props.id}/logs/stream`} />
      <h2>Lifecycle events</h2>
      {events.length === 0 ? (
        <p class="muted">No events.</p>
      ) : (
        <table class="list events">
          <thead>
            <tr>
              <th>Time</th>
              <th>Event</th>
              <th>Data</th>
            </tr>
          </thead>
          <tbody>
            {events.map((ev) => (
              <tr key={ev.id}>
                <td data-label="Time">{time(ev.timestamp)}</td>
                <td data-label="Event" class="mono">
                  {ev.type.replace("sandbox.lifecycle.", "")}
                </td>
                <td data-label="Data" class="mono">
                  {ev.eventData ? JSON.stringify(ev.eventData) : ""}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

// Logs shows the lines of a "logs" event stream, following the end
// unless the reader has scrolled up.
export function Logs(props: { path: string; onEvent?: Record<string, (d: unknown) => void> }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const ref = useRef<HTMLPreElement>(null);
  useEffect(() => {
    setLines([]);
    return stream(props.path, { logs: (d) => setLines((ls) => [...ls, ...(d as LogLine[])].slice(-5000)), ...(props.onEvent ?? {}) });
  }, [props.path]);
  useEffect(() => {
    const el = ref.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [lines]);
  return (
    <pre class="logs" ref={ref} tabIndex={0} aria-label="Log" aria-live="polite">
      {lines.length === 0 && <span class="muted">No log lines yet.</span>}
      {lines.map((l, i) => (
        <div key={i} class={"line " + l.level}>
          <span class="ts">{new Date(l.timestamp).toLocaleTimeString(undefined, { hour12: false })}</span>
          {l.step !== undefined && l.step !== "" && <span class="step">[{l.step}]</span>} {l.message}
          {l.fields && Object.keys(l.fields).length > 0 && <span class="muted"> {Object.entries(l.fields).map(([k, v]) => `${k}=${v}`).join(" ")}</span>}
        </div>
      ))}
    </pre>
  );
}
