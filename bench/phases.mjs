// phases.mjs: where a create's time goes, from the histograms warren_create_phase_seconds of a
// server's GET /metrics (internal/phases), for bench/burst's programs.

// phaseHistograms parses warren_create_phase_seconds from a /metrics text:
// { path: { phase: { buckets: [[le, cumulative]], sum, count } } }.
export function phaseHistograms(text) {
  const h = {}
  const get = (path, phase) => ((h[path] ??= {})[phase] ??= { buckets: [], sum: 0, count: 0 })
  for (const m of text.matchAll(/^warren_create_phase_seconds_(bucket|sum|count)\{path="([^"]*)",phase="([^"]*)"(?:,le="([^"]*)")?\} (\S+)$/gm)) {
    const s = get(m[2], m[3])
    if (m[1] === 'bucket') s.buckets.push([m[4] === '+Inf' ? Infinity : Number(m[4]), Number(m[5])])
    else s[m[1]] = Number(m[5])
  }
  return h
}

// phaseStats returns, per path and phase, the count, mean and p50 (interpolated within its
// histogram bucket) in ms of the creates between two /metrics texts.
export function phaseStats(before, after) {
  const a = phaseHistograms(after)
  const b = phaseHistograms(before)
  const out = {}
  for (const [path, byPhase] of Object.entries(a)) {
    for (const [phase, s] of Object.entries(byPhase)) {
      const o = b[path]?.[phase]
      const n = s.count - (o?.count ?? 0)
      if (n <= 0) continue
      const cum = s.buckets.map(([le, c], i) => [le, c - (o?.buckets[i]?.[1] ?? 0)])
      let p50 = NaN
      for (let i = 0, lo = 0, prev = 0; i < cum.length; i++) {
        const [le, c] = cum[i]
        if (c >= n / 2) {
          p50 = le === Infinity ? lo : lo + ((le - lo) * (n / 2 - prev)) / Math.max(c - prev, 1)
          break
        }
        lo = le
        prev = c
      }
      ;(out[path] ??= {})[phase] = { n, p50_ms: p50 * 1000, mean_ms: ((s.sum - (o?.sum ?? 0)) / n) * 1000 }
    }
  }
  return out
}

// The order phases happen in on each path (a path may lack some: egress without rules is ~0).
export const phaseOrder = ['resolve', 'image_id', 'pool_miss', 'gate', 'save', 'limits', 'image_place', 'engine_create',
  'pod_scheduled', 'pod_initialized', 'engine_start', 'pids_limit', 'engine_inspect', 'engine', 'egress', 'agent_wait', 'agent_init', 'agent', 'template', 'save_running', 'total']

// The first bucket's bound (ms): a p50 in it is only known to be below it.
export const phaseBounds0 = 0.5
