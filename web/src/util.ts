// Formatting helpers shared by the views.

export function ago(iso: string, now = Date.now()): string {
  return duration(now - Date.parse(iso));
}

export function duration(ms: number): string {
  if (!isFinite(ms) || ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

export function bytes(n: number): string {
  if (!n) return "0 B";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export function time(iso: string): string {
  const d = new Date(iso);
  return d.toLocaleString(undefined, { hour12: false });
}

export function stateLabel(state: string, pauseMode?: string): string {
  return state === "paused" && pauseMode ? `paused (${pauseMode})` : state;
}
