import { useEffect, useMemo, useState } from "preact/hooks";
import { stream, type Sandbox } from "../api";
import { Link, Sparkline, StateBadge, useNow } from "../components";
import { ago, bytes, duration } from "../util";

// SandboxList is the team's running and paused sandboxes, kept live by
// the server's "sandboxes" events.
export function SandboxList() {
  const [list, setList] = useState<Sandbox[] | null>(null);
  const [received, setReceived] = useState(Date.now());
  const [live, setLive] = useState(false);
  const [query, setQuery] = useState("");
  const [state, setState] = useState("all");
  const [tpl, setTpl] = useState("all");
  const now = useNow();

  useEffect(
    () =>
      stream(
        "sandboxes/stream",
        {
          sandboxes: (d) => {
            setList(d as Sandbox[]);
            setReceived(Date.now());
          },
        },
        setLive,
      ),
    [],
  );

  const templates = useMemo(() => [...new Set((list ?? []).map((s) => s.alias || s.templateId))].sort(), [list]);
  const shown = (list ?? []).filter((s) => {
    if (state !== "all" && s.state !== state) return false;
    if (tpl !== "all" && (s.alias || s.templateId) !== tpl) return false;
    if (!query) return true;
    const q = query.toLowerCase();
    const hay = [s.sandboxId, s.templateId, s.alias ?? "", ...Object.entries(s.metadata).map(([k, v]) => `${k}=${v}`)];
    return hay.some((h) => h.toLowerCase().includes(q));
  });

  return (
    <section>
      <div class="title">
        <h1>Sandboxes</h1>
        <span class={"live " + (live ? "on" : "off")} role="status">
          {live ? "live" : "reconnecting…"}
        </span>
      </div>
      <div class="filters" role="search">
        <input
          type="search"
          placeholder="Search ID, template, metadata (key=value)"
          aria-label="Search sandboxes"
          value={query}
          onInput={(e) => setQuery(e.currentTarget.value)}
        />
        <select aria-label="State" value={state} onChange={(e) => setState(e.currentTarget.value)}>
          <option value="all">All states</option>
          <option value="running">Running</option>
          <option value="paused">Paused</option>
        </select>
        <select aria-label="Template" value={tpl} onChange={(e) => setTpl(e.currentTarget.value)}>
          <option value="all">All templates</option>
          {templates.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
      </div>
      {list === null ? (
        <p class="muted">Loading…</p>
      ) : shown.length === 0 ? (
        <p class="empty">{list.length === 0 ? "No sandboxes are running or paused." : "No sandbox matches."}</p>
      ) : (
        <table class="list sandboxes">
          <thead>
            <tr>
              <th>Sandbox</th>
              <th>State</th>
              <th>Template</th>
              <th>Metadata</th>
              <th>CPU</th>
              <th>Memory</th>
              <th>Age</th>
              <th>Time left</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((s) => {
              const left = s.state === "running" ? s.timeLeftMs - (now - received) : s.timeLeftMs;
              const cpuNow = s.cpu.length ? s.cpu[s.cpu.length - 1] : 0;
              const memNow = s.mem.length ? s.mem[s.mem.length - 1] : 0;
              return (
                <tr key={s.sandboxId} data-id={s.sandboxId}>
                  <td data-label="Sandbox">
                    <Link to={"sandboxes/" + s.sandboxId} class="mono">
                      {s.sandboxId}
                    </Link>
                  </td>
                  <td data-label="State">
                    <StateBadge state={s.state} pauseMode={s.pauseMode} />
                  </td>
                  <td data-label="Template">{s.alias || s.templateId}</td>
                  <td data-label="Metadata" class="meta">
                    {Object.entries(s.metadata).map(([k, v]) => (
                      <span class="tag" key={k}>
                        {k}={v}
                      </span>
                    ))}
                  </td>
                  <td data-label="CPU">
                    <Sparkline values={s.cpu} max={100} label={`CPU ${cpuNow.toFixed(0)}%`} />
                    <span class="num">{cpuNow.toFixed(0)}%</span>
                  </td>
                  <td data-label="Memory">
                    <Sparkline values={s.mem} max={s.memTotal || s.memoryMB * 1048576} label={`memory ${bytes(memNow)}`} class="mem" />
                    <span class="num">{bytes(memNow)}</span>
                  </td>
                  <td data-label="Age">{ago(s.startedAt, now)}</td>
                  <td data-label="Time left">{duration(left)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}
