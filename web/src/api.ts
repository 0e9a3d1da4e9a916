// The dashboard's JSON and server-sent-events API (internal/web).

export const base = "/dashboard/";
const apiBase = base + "api/";

export interface Session {
  teamId: string;
  teamName: string;
  csrfToken: string;
  expiresAt: string;
  operator: boolean;
}

export interface Sandbox {
  sandboxId: string;
  templateId: string;
  alias?: string;
  state: "running" | "paused" | string;
  pauseMode?: string;
  runtime: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  metadata: Record<string, string>;
  startedAt: string;
  endAt?: string;
  timeLeftMs: number;
  cpu: number[];
  mem: number[];
  memTotal: number;
}

export interface Metric {
  timestamp: string;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  diskUsed: number;
  diskTotal: number;
}

export interface LogLine {
  timestamp: string;
  level: string;
  message: string;
  step?: string;
  fields?: Record<string, string>;
}

export interface LifecycleEvent {
  id: string;
  type: string;
  timestamp: string;
  sandboxExecutionId: string;
  eventData: Record<string, unknown> | null;
}

export interface Build {
  buildId: string;
  status: string;
  reason?: string;
  step?: string;
  tags: string[];
  createdAt: string;
  updatedAt: string;
  steps: number;
  done: number;
}

export interface Template {
  templateId: string;
  names: string[];
  public: boolean;
  cpuCount: number;
  memoryMB: number;
  createdAt: string;
  updatedAt: string;
  lastBuild?: Build;
}

export interface Snapshot {
  snapshotId: string;
  sandboxId: string;
  name?: string;
  createdAt: string;
}

export interface Volume {
  volumeId: string;
  name: string;
  createdAt: string;
  usedBytes: number;
  limitBytes: number; // 0: no limit
  mountedBy: { sandboxId: string; path: string }[];
}

export interface Key {
  id: string;
  name: string;
  mask: string;
  createdAt: string;
  key?: string;
}

export interface Check {
  name: string;
  ok: boolean;
  warning?: boolean;
  message: string;
}

export interface ServerView {
  version: string;
  engine: string;
  stateDir: string;
  firewall: string;
  domain: string;
  runtime: string;
  running: number;
  paused: Record<string, number>;
  poolReady: Record<string, number>;
  poolSize: Record<string, number>;
  checkpoints: number;
  checkpointBytes: number;
  checkpointError?: string;
  maxTimeoutSec: number;
  defaultCpuCount: number;
  defaultMemoryMB: number;
  checks: Check[];
}

export interface TeamQuota {
  id: string;
  name: string;
  usage: { sandboxes: number; vcpus: number; memoryMB: number; diskMB: number };
  // In effect: the team's quota over the server's defaults; 0 = no limit.
  limits: { maxSandboxes: number; maxVCPUs: number; maxMemoryMB: number; maxDiskMB: number; maxCreatesPerSecond: number; maxVolumes: number; maxVolumeMB: number };
  // The team's own: a field left out is the server's default.
  quota: { maxSandboxes?: number; maxVCPUs?: number; maxMemoryMB?: number; maxDiskMB?: number; maxCreatesPerSecond?: number; maxVolumes?: number; maxVolumeMB?: number };
}

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

let csrf = "";
let onUnauthorized: () => void = () => {};

export function setSession(s: Session | null): void {
  csrf = s ? s.csrfToken : "";
}

export function csrfToken(): string {
  return csrf;
}

export function whenUnauthorized(f: () => void): void {
  onUnauthorized = f;
}

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-Warren-CSRF"] = csrf;
  const res = await fetch(apiBase + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    if (res.status === 401 && path !== "login") onUnauthorized();
    const msg = (data as { message?: string } | null)?.message ?? res.statusText;
    throw new ApiError(res.status, msg);
  }
  return data as T;
}

export const api = {
  get: <T>(path: string) => request<T>("GET", path),
  post: <T>(path: string, body?: unknown) => request<T>("POST", path, body ?? {}),
  put: <T>(path: string, body: unknown) => request<T>("PUT", path, body),
  del: <T>(path: string) => request<T>("DELETE", path),
};

// stream opens a server-sent-events stream and calls on for each event
// of the named types; the returned function closes it. EventSource
// reconnects by itself after a network error.
export function stream(
  path: string,
  on: Record<string, (data: unknown) => void>,
  onState?: (open: boolean) => void,
): () => void {
  const es = new EventSource(apiBase + path);
  for (const [name, f] of Object.entries(on)) {
    es.addEventListener(name, (ev) => f(JSON.parse((ev as MessageEvent<string>).data)));
  }
  es.onopen = () => onState?.(true);
  es.onerror = () => onState?.(false);
  return () => es.close();
}
