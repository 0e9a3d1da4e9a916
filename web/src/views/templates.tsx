import { useEffect, useState } from "preact/hooks";
import { api, type Build, type Template } from "../api";
import { ErrorNote, Link } from "../components";
import { time } from "../util";
import { Logs } from "./sandbox";

export function Templates() {
  const [list, setList] = useState<Template[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () => api.get<Template[]>("templates").then(setList, (e) => setError(e.message));
    load();
    const t = setInterval(load, 3000);
    return () => clearInterval(t);
  }, []);
  return (
    <section>
      <h1>Templates</h1>
      <ErrorNote error={error} />
      {list === null ? (
        <p class="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p class="empty">
          No templates built yet: <code>warren template build</code> or the SDK's <code>Template.build</code> makes one.
        </p>
      ) : (
        <table class="list">
          <thead>
            <tr>
              <th>Template</th>
              <th>Names</th>
              <th>Last build</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {list.map((t) => (
              <tr key={t.templateId}>
                <td data-label="Template">
                  <Link to={"templates/" + t.templateId} class="mono">
                    {t.templateId}
                  </Link>
                </td>
                <td data-label="Names">{t.names.join(", ")}</td>
                <td data-label="Last build">{t.lastBuild ? <BuildStatus b={t.lastBuild} /> : <span class="muted">none</span>}</td>
                <td data-label="Updated">{time(t.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function BuildStatus(props: { b: Build }) {
  return <span class={"badge " + props.b.status}>{props.b.status}</span>;
}

function Progress(props: { b: Build }) {
  const pct = props.b.steps ? Math.round((props.b.done / props.b.steps) * 100) : props.b.status === "ready" ? 100 : 0;
  return (
    <div class="progress">
      <progress max={100} value={pct} aria-label="Build progress" />
      <span class="muted">
        {props.b.done}/{props.b.steps} steps
      </span>
    </div>
  );
}

// TemplateDetail lists a template's builds and streams the chosen one's
// log (the newest by default) with its progress.
export function TemplateDetail(props: { id: string; build?: string }) {
  const [builds, setBuilds] = useState<Build[] | null>(null);
  const [live, setLive] = useState<Build | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () => api.get<Build[]>(`templates/${props.id}/builds`).then(setBuilds, (e) => setError(e.message));
    load();
    const t = setInterval(load, 3000);
    return () => clearInterval(t);
  }, [props.id]);
  const chosen = props.build ?? builds?.[0]?.buildId;
  return (
    <section>
      <p class="crumbs">
        <Link to="templates">Templates</Link> / <span class="mono">{props.id}</span>
      </p>
      <h1 class="mono">{props.id}</h1>
      <ErrorNote error={error} />
      {builds && (
        <table class="list builds">
          <thead>
            <tr>
              <th>Build</th>
              <th>Status</th>
              <th>Tags</th>
              <th>Started</th>
            </tr>
          </thead>
          <tbody>
            {builds.map((b) => (
              <tr key={b.buildId} class={b.buildId === chosen ? "chosen" : ""}>
                <td data-label="Build">
                  <Link to={`templates/${props.id}/${b.buildId}`} class="mono">
                    {b.buildId}
                  </Link>
                </td>
                <td data-label="Status">
                  <BuildStatus b={b} />
                  {b.reason && <span class="error-text"> {b.reason}</span>}
                </td>
                <td data-label="Tags">{b.tags.join(", ")}</td>
                <td data-label="Started">{time(b.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {chosen && (
        <>
          <h2>
            Build <span class="mono">{chosen}</span> {live && <BuildStatus b={live} />}
          </h2>
          {live && <Progress b={live} />}
          <Logs path={`templates/${props.id}/builds/${chosen}/stream`} onEvent={{ build: (d) => setLive(d as Build) }} />
        </>
      )}
    </section>
  );
}
