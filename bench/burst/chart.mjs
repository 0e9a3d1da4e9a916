// chart.mjs: the chart of bench/README.md's bursts section, drawn from burst.mjs's JSON: create →
// first command against burst size, Warren's second burst beside the engine's floor of the same
// run, p50 as lines and p95 as a band, one panel per JSON (before, after).
//
//   node bench/burst/chart.mjs --out bench/burst/chart.png \
//        'before (main at 61ca359, load 16–27)=bench/burst/results/before-61ca359.json' \
//        'after (quiet machine)=bench/burst/results/after-quiet-2026-12-02.json'
//
// It writes an SVG and renders it to PNG with headless Chromium (Debian's chromium, which the
// dashboard tests use): CHROMIUM names another binary.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

const { values: opt, positionals } = parseArgs({
  options: { out: { type: 'string', default: 'bench/burst/chart.png' } },
  allowPositionals: true,
})
if (positionals.length === 0) throw new Error("give one or more 'title=file.json' panels")
const panels = positionals.map((p) => {
  const i = p.lastIndexOf('=')
  if (i < 0) throw new Error(`'${p}': want title=file.json`)
  return { title: p.slice(0, i), data: JSON.parse(readFileSync(p.slice(i + 1), 'utf8')) }
})

const sizes = [1, 10, 50, 100]
const W = 440 // one panel
const H = 380
const M = { l: 62, r: 14, t: 44, b: 48 }
const yMin = 20
const yMax = 40000
const x = (i) => M.l + ((W - M.l - M.r) * (i + 0.5)) / sizes.length
const y = (ms) => M.t + (H - M.t - M.b) * (1 - Math.log10(ms / yMin) / Math.log10(yMax / yMin))
// The issue's goals for a second burst's p50 (issue 16).
const goals = { 1: 40, 10: 150, 50: 400, 100: 700 }
const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;')
const series = [
  { key: 'second', label: 'Warren, second burst', color: '#1f6fd1' },
  { key: 'floor', label: 'engine floor: docker run -d', color: '#c0392b' },
]

function panel({ title, data }, ox) {
  const g = [`<g transform="translate(${ox},0)">`]
  g.push(`<text x="${M.l}" y="22" font-size="14" font-weight="bold">${esc(title)}</text>`)
  for (const ms of [20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 40000]) {
    const label = ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`
    g.push(`<line x1="${M.l}" x2="${W - M.r}" y1="${y(ms)}" y2="${y(ms)}" stroke="#e4e4e4"/>`)
    g.push(`<text x="${M.l - 6}" y="${y(ms) + 4}" font-size="11" text-anchor="end" fill="#555">${label}</text>`)
  }
  sizes.forEach((n, i) => g.push(`<text x="${x(i)}" y="${H - M.b + 18}" font-size="12" text-anchor="middle">${n}</text>`))
  g.push(`<text x="${(M.l + W - M.r) / 2}" y="${H - 10}" font-size="12" text-anchor="middle" fill="#333">creates at once (burst size)</text>`)
  g.push(`<rect x="${M.l}" y="${M.t}" width="${W - M.l - M.r}" height="${H - M.t - M.b}" fill="none" stroke="#999"/>`)
  g.push(`<polyline points="${sizes.map((n, i) => `${x(i)},${y(goals[n])}`).join(' ')}" fill="none" stroke="#777" stroke-width="1.5" stroke-dasharray="5,4"/>`)
  for (const s of series) {
    const pts = sizes.map((n, i) => ({ i, v: data.sizes?.[n]?.[s.key] })).filter((p) => p.v?.p50 > 0)
    const band = pts.filter((p) => p.v.p95 > 0)
    if (band.length > 1) {
      const upper = band.map((p) => `${x(p.i)},${y(p.v.p95)}`)
      const lower = band.map((p) => `${x(p.i)},${y(p.v.p50)}`).reverse()
      g.push(`<polygon points="${[...upper, ...lower].join(' ')}" fill="${s.color}" fill-opacity="0.15"/>`)
    }
    g.push(`<polyline points="${pts.map((p) => `${x(p.i)},${y(p.v.p50)}`).join(' ')}" fill="none" stroke="${s.color}" stroke-width="2.5"/>`)
    for (const p of pts) {
      g.push(`<circle cx="${x(p.i)}" cy="${y(p.v.p50)}" r="3.5" fill="${s.color}"/>`)
      if (p.v.p95 > 0) g.push(`<line x1="${x(p.i) - 6}" x2="${x(p.i) + 6}" y1="${y(p.v.p95)}" y2="${y(p.v.p95)}" stroke="${s.color}" stroke-width="2"/>`)
      const v = p.v.p50 >= 1000 ? `${(p.v.p50 / 1000).toFixed(2)} s` : `${Math.round(p.v.p50)} ms`
      g.push(`<text x="${x(p.i) + 7}" y="${y(p.v.p50) + (s.key === 'floor' ? -7 : 14)}" font-size="10.5" fill="${s.color}">${v}</text>`)
    }
  }
  g.push('</g>')
  return g.join('\n')
}

const legendY = H + 14
const width = W * panels.length
const height = H + 30
const legend = [...series, { label: 'goal (p50)', color: '#777', dash: '5,4' }].map((s, i) => {
  const lx = 40 + i * 230
  return `<line x1="${lx}" x2="${lx + 24}" y1="${legendY}" y2="${legendY}" stroke="${s.color}" stroke-width="2.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>` +
    `<text x="${lx + 30}" y="${legendY + 4}" font-size="12">${esc(s.label)}</text>`
})
legend.push(`<text x="${40 + 3 * 230 - 40}" y="${legendY + 4}" font-size="12" fill="#555">lines: p50; bands, ticks: p95</text>`)
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="DejaVu Sans, sans-serif">
<rect width="100%" height="100%" fill="#fff"/>
${panels.map((p, i) => panel(p, i * W)).join('\n')}
${legend.join('\n')}
</svg>`

const dir = mkdtempSync(join(tmpdir(), 'burst-chart-'))
try {
  const file = join(dir, 'chart.svg')
  writeFileSync(file, svg)
  execFileSync(process.env.CHROMIUM || 'chromium', ['--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars',
    `--user-data-dir=${join(dir, 'profile')}`, `--window-size=${width},${height}`, `--screenshot=${opt.out}`, `file://${file}`],
  { stdio: 'pipe' })
} finally {
  rmSync(dir, { recursive: true, force: true })
}
console.log(`${opt.out}: ${width}×${height}`)
