// stats.mjs: the latency summaries the JavaScript benchmarks (codeinterp/, server/) print.

/** pct returns the p-th percentile of xs (nearest rank). */
export const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]
}

/** stat summarises latencies in ms. */
export const stat = (xs) => ({ n: xs.length, p50: pct(xs, 50), p95: pct(xs, 95), min: Math.min(...xs), max: Math.max(...xs) })

export const fmt = (s) => `p50 ${s.p50.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  (min ${s.min.toFixed(1)}, max ${s.max.toFixed(1)}, n=${s.n})`

/**
 * reporter returns report(key, label, xs), which stores stat(xs) in results[key] and, unless
 * quiet (--json), prints it after label padded to width.
 */
export const reporter = (results, width, quiet) => (key, label, xs) => {
  const s = stat(xs)
  results[key] = s
  if (!quiet) console.log(`${label.padEnd(width)} ${fmt(s)}`)
}
