import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, base } from "./api";
import { navigate } from "./router";

export function Link(props: { to: string; class?: string; children: ComponentChildren; "aria-current"?: "page" }) {
  const onClick = (e: MouseEvent) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(props.to);
  };
  return (
    <a href={base + props.to} class={props.class} onClick={onClick} aria-current={props["aria-current"]}>
      {props.children}
    </a>
  );
}

// Sparkline draws values as a small line, scaled to max (or their own
// maximum).
export function Sparkline(props: { values: number[]; max?: number; label: string; class?: string }) {
  const w = 100;
  const h = 24;
  const vs = props.values;
  const max = props.max || Math.max(1, ...vs);
  const y = (v: number) => h - (Math.min(v, max) / max) * (h - 2) - 1;
  // One sample is a flat line: there is no change to show yet.
  const pts = vs.length === 1 ? [`0,${y(vs[0])}`, `${w},${y(vs[0])}`] : vs.map((v, i) => `${(i / (vs.length - 1)) * w},${y(v)}`);
  return (
    <svg class={"spark " + (props.class ?? "")} viewBox={`0 0 ${w} ${h}`} preserveAspectRatio="none" role="img" aria-label={props.label}>
      {vs.length > 0 && <polyline points={pts.join(" ")} fill="none" vector-effect="non-scaling-stroke" />}
    </svg>
  );
}

// Chart draws one series over time with its axis labels.
export function Chart(props: { title: string; points: { t: number; v: number }[]; max?: number; format: (v: number) => string }) {
  const w = 600;
  const h = 160;
  const ps = props.points;
  const max = props.max || Math.max(1, ...ps.map((p) => p.v));
  const t0 = ps.length ? ps[0].t : 0;
  const t1 = ps.length ? ps[ps.length - 1].t : 1;
  const x = (t: number) => (t1 === t0 ? w : ((t - t0) / (t1 - t0)) * w);
  const y = (v: number) => h - (Math.min(v, max) / max) * (h - 4) - 2;
  const line = ps.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
  const last = ps.length ? ps[ps.length - 1].v : 0;
  return (
    <figure class="chart">
      <figcaption>
        <span>{props.title}</span>
        <span class="muted">
          now {props.format(last)} · max {props.format(max)}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} preserveAspectRatio="none" role="img" aria-label={props.title}>
        <line x1="0" y1={h - 1} x2={w} y2={h - 1} class="axis" />
        {ps.length > 1 && <polygon points={`0,${h} ${line} ${w},${h}`} class="area" />}
        {ps.length > 0 && <polyline points={line} fill="none" vector-effect="non-scaling-stroke" />}
      </svg>
      {ps.length === 0 && <p class="muted">No samples yet.</p>}
    </figure>
  );
}

// Confirm is a modal dialog asking before an action.
export function Confirm(props: {
  title: string;
  children?: ComponentChildren;
  confirm: string;
  danger?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  return (
    <dialog ref={ref} onCancel={props.onCancel} aria-labelledby="confirm-title">
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          props.onConfirm();
        }}
      >
        <h2 id="confirm-title">{props.title}</h2>
        {props.children}
        <div class="buttons">
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
          <button type="submit" class={props.danger ? "danger" : "primary"} autofocus>
            {props.confirm}
          </button>
        </div>
      </form>
    </dialog>
  );
}

export function ErrorNote(props: { error: string | null }) {
  return props.error ? (
    <p class="error" role="alert">
      {props.error}
    </p>
  ) : null;
}

// useList loads a list from the dashboard's API at path (again every
// pollMs, when given) and runs the view's actions on it: act shows an
// action's failure in error and loads the list again either way.
export function useList<T>(path: string, pollMs = 0) {
  const [list, setList] = useState<T[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => api.get<T[]>(path).then(setList, (e) => setError(e.message));
  useEffect(() => {
    load();
    if (!pollMs) return;
    const t = setInterval(load, pollMs);
    return () => clearInterval(t);
  }, [path, pollMs]);
  const act = async (f: () => Promise<unknown>) => {
    setError(null);
    try {
      await f();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
    load();
  };
  return { list, error, setError, act };
}

// useNow re-renders every period, for ages and times left.
export function useNow(period = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), period);
    return () => clearInterval(t);
  }, [period]);
  return now;
}

export function StateBadge(props: { state: string; pauseMode?: string }) {
  return (
    <span class={"badge " + props.state} data-state={props.state}>
      {props.state === "paused" && props.pauseMode ? `paused · ${props.pauseMode}` : props.state}
    </span>
  );
}
