// engines.mjs: the same creates on the Docker engine and on the Kubernetes engine, side by side
// in one run, through the official e2b SDK: what a sandbox costs on a cluster against one
// machine, by part and by phase, with the ratio Kubernetes / Docker of each.
//
//   bench/burst/kube.sh [--only sequential,bursts,template] [--n 20] [--sizes 10,50]
//                       [--pause 20] [--json] [--out FILE] [--bin DIR] [--serve-arg=...]
//                       [--kube-arg=--request-percent=1 ...] [--baseline DIR]
//
// Run through bench/burst/kube.sh, which sets the cluster up as test/e2e/kube-run.sh does
// (under its lock: one run on the cluster at a time) and runs this with WARREN_ENGINE=kubernetes
// and the rest of its environment. Two private servers (test/e2e/server/harness.mjs): one on the
// local Docker engine, one on the cluster. Each part runs on one engine, then on the other:
//   sequential  --n creates one at a time back to back (each killed before the next), from
//               the warm pool: create → first commands.run('true');
//   bursts      for each size N, N creates at once, twice (the second --pause seconds after
//               the first's sandboxes are killed: the pool has learned the burst);
//   template    a template of the user's own, built with Template.build() from warren/base
//               (deleted at the end), then --n creates of it one at a time, 1 s apart: the
//               build's time, the first create, the p50 after the first 3.
// --serve-arg goes to both servers, --kube-arg to the Kubernetes one only. A pod requests
// --request-percent (default 10) of its limits (2 CPUs by default): a node of 2 CPUs holds about
// ten sandboxes, so bursts of 50 or more need --kube-arg=--request-percent=1 on the test cluster.
// With --json the figures go to stdout as JSON, the progress to stderr; --out FILE writes the
// JSON there too. --bin DIR runs both servers on the binaries of DIR (warren, warren-agent; the
// node agents stay those kube-run.sh imported); kube.sh's --baseline DIR runs this twice under
// one hold of the cluster's lock, on DIR's binaries and then on the worktree's: before and after.
// Every part also prints where the creates' time went on each engine: the p50 / mean of each
// phase (warren_create_phase_seconds of GET /metrics, internal/phases) over that part.
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import os from 'node:os'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { sdk } from '../server.mjs'
import { stat, fmt } from '../stats.mjs'
import { phaseOrder, phaseStats } from '../phases.mjs'

const parts = ['sequential', 'bursts', 'template']
const { values: opt } = parseArgs({
  options: {
    only: { type: 'string', default: parts.join(',') },
    n: { type: 'string', default: '20' },
    sizes: { type: 'string', default: '10,50' },
    pause: { type: 'string', default: '20' },
    json: { type: 'boolean', default: false },
    out: { type: 'string' },
    bin: { type: 'string' },
    'serve-arg': { type: 'string', multiple: true, default: [] },
    'kube-arg': { type: 'string', multiple: true, default: [] },
  },
})
const only = opt.only.split(',')
for (const p of only) if (!parts.includes(p)) throw new Error(`--only: no part '${p}' (parts: ${parts.join(', ')})`)
const sizes = opt.sizes.split(',').map(Number)
const count = Number(opt.n)
if (!(count >= 4)) throw new Error('--n must be 4 or more')
if (process.env.WARREN_ENGINE !== 'kubernetes') throw new Error('run it through bench/burst/kube.sh (WARREN_ENGINE=kubernetes and the cluster)')

const { Sandbox, Template } = await sdk('e2b')
const now = () => performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const note = (m) => (opt.json ? console.error(m) : console.log(m))
const tag = `enginebench-${process.pid}`

// The harness removes what a server leaves by WARREN_ENGINE of this process: the engine of the
// server at hand is set around each call that may (see use()).
delete process.env.WARREN_ENGINE
const args = ['--server-memory-mb=0', ...opt['serve-arg']]
const bins = opt.bin ? { bin: `${opt.bin}/warren`, agentBin: `${opt.bin}/warren-agent` } : {}
const engines = [
  { key: 'docker', srv: new WarrenServer({ name: `warren-eng-d-${process.pid}`, args: ['--engine', 'docker', ...args], ...bins }) },
  { key: 'kubernetes', srv: new WarrenServer({ name: `warren-eng-k-${process.pid}`, args: [...args, ...opt['kube-arg']], env: { WARREN_ENGINE: 'kubernetes' }, ...bins }), kube: true },
]

// use points the SDK (and the harness's clean-up) at engine e's server.
function use(e) {
  Object.assign(process.env, e.srv.sdkEnv)
  delete process.env.E2B_DEBUG
  if (e.kube) process.env.WARREN_ENGINE = 'kubernetes'
  else delete process.env.WARREN_ENGINE
}

async function metrics(srv) {
  const r = await srv.api('/metrics')
  if (!r.ok) throw new Error(`GET /metrics: ${r.status} ${await r.text()}`)
  return r.text()
}

// createAndRun times Sandbox.create() → the first commands.run('true'), and create() alone
// (createMs: the rest is the first command's way to the sandbox).
const createMs = []
async function createAndRun(template) {
  const t0 = now()
  const sbx = template ? await Sandbox.create(template) : await Sandbox.create()
  createMs.push(now() - t0)
  await sbx.commands.run('true')
  return { sbx, ms: now() - t0 }
}

// series runs n creates one at a time, waiting pauseMs before each, each killed before the
// next: their times in order (undefined for a failure) and the errors.
async function series(n, pauseMs, template) {
  const lat = []
  const errors = []
  for (let i = 0; i < n; i++) {
    if (pauseMs) await sleep(pauseMs)
    try {
      const r = await createAndRun(template)
      lat.push(r.ms)
      await r.sbx.kill()
    } catch (e) {
      lat.push(undefined)
      errors.push(String(e?.message ?? e))
    }
  }
  return { lat, errors }
}

async function burst(n) {
  const t0 = now()
  const rs = await Promise.allSettled(Array.from({ length: n }, () => createAndRun()))
  const wall = now() - t0
  const ok = rs.filter((r) => r.status === 'fulfilled').map((r) => r.value)
  const errors = rs.filter((r) => r.status === 'rejected').map((r) => String(r.reason?.message ?? r.reason))
  await Promise.allSettled(ok.map((r) => r.sbx.kill()))
  return { lat: ok.map((r) => r.ms), errors, wall }
}

const summary = (lat, errors) => ({ ...stat(lat.filter(Number.isFinite)), failures: errors.length, errors: [...new Set(errors)].slice(0, 3) })
const line = (label, s) => note(`  ${label.padEnd(38)} ${s.n ? fmt(s) : 'no successes'}  failures ${s.failures ?? 0}${s.errors?.length ? `: ${s.errors.join(' | ')}` : ''}`)

// measured runs fn on each engine in turn and returns { docker, kubernetes } of what it
// returned, with the phases of the creates it made on each ({ path: { phase: stats } }).
async function measured(label, fn) {
  const out = {}
  for (const e of engines) {
    use(e)
    note(`${label} — ${e.key}`)
    const m0 = await metrics(e.srv)
    createMs.length = 0
    out[e.key] = await fn(e)
    out[e.key].phases = phaseStats(m0, await metrics(e.srv))
    out[e.key].create_only = stat(createMs)
    note(`  of which Sandbox.create() alone: p50 ${out[e.key].create_only.p50?.toFixed(1)} ms, p95 ${out[e.key].create_only.p95?.toFixed(1)} ms`)
  }
  use(engines[0])
  return out
}

// ratios prints the p50s of both engines and Kubernetes / Docker, and the phases side by side.
function ratios(label, d, k) {
  const r = k.p50 / d.p50
  note(`  ${label.padEnd(38)} p50 docker ${d.p50?.toFixed(1)} ms, kubernetes ${k.p50?.toFixed(1)} ms: ${r.toFixed(2)}×`)
  return r
}

function printPhases(byEngine) {
  for (const path of ['pool', 'cold']) {
    const names = [...new Set(engines.flatMap((e) => Object.keys(byEngine[e.key].phases[path] ?? {})))]
      .sort((x, y) => phaseOrder.indexOf(x) - phaseOrder.indexOf(y))
    if (!names.length) continue
    note(`  phases on the ${path} path, p50 / mean ms (n)   ${engines.map((e) => e.key.padStart(22)).join('')}`)
    for (const p of names) {
      const cell = (e) => {
        const s = byEngine[e.key].phases[path]?.[p]
        return s ? `${s.p50_ms.toFixed(1)} / ${s.mean_ms.toFixed(1)} (${s.n})` : '–'
      }
      note(`    ${p.padEnd(42)} ${engines.map((e) => cell(e).padStart(22)).join('')}`)
    }
  }
}

const templates = []
const results = { parts: only, n: count, bin: opt.bin ?? 'bin', serve_args: opt['serve-arg'], kube_args: opt['kube-arg'], load_start: os.loadavg(), started: new Date().toISOString() }
let failed = false
try {
  for (const e of engines) {
    use(e)
    await e.srv.start()
  }
  note(`Docker and Kubernetes engines side by side — ${results.started} — ${os.cpus().length} × ${os.cpus()[0]?.model}, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  // Warm-up: each server's first create, and its pool's first fill.
  for (const e of engines) {
    use(e)
    await (await createAndRun()).sbx.kill()
  }
  await sleep(5000)

  if (only.includes('sequential')) {
    const r = await measured(`one at a time, back to back (n=${count})`, async () => {
      const { lat, errors } = await series(count, 0)
      const s = summary(lat, errors)
      line('create → first command', s)
      return s
    })
    results.sequential = { ...r, ratio_p50: ratios('one at a time, back to back', r.docker, r.kubernetes) }
    printPhases(r)
  }

  if (only.includes('bursts')) {
    results.bursts = {}
    for (const n of sizes) {
      const r = await measured(`burst of ${n}, twice`, async () => {
        const o = {}
        for (const which of ['first', 'second']) {
          const b = await burst(n)
          o[which] = { ...summary(b.lat, b.errors), wall_ms: b.wall }
          line(`${which} burst of ${n} (wall ${b.wall.toFixed(0)} ms)`, o[which])
          if (which === 'first') await sleep(Number(opt.pause) * 1000)
        }
        return o
      })
      results.bursts[n] = { ...r, ratio_second_p50: ratios(`second burst of ${n}`, r.docker.second, r.kubernetes.second) }
      printPhases(r)
    }
  }

  if (only.includes('template')) {
    const r = await measured(`a template of the user's own (n=${count}, 1 s apart)`, async (e) => {
      const name = `${tag}-${e.key}`
      templates.push({ e, name })
      const t0 = now()
      await Template.build(Template().fromImage('warren/base').runCmd(`echo ${tag} > /tmp/enginebench`), name)
      const build = now() - t0
      const { lat, errors } = await series(count, 1000, name)
      const after = summary(lat.slice(3), errors)
      note(`  Template.build() ${build.toFixed(0)} ms; first create ${lat[0]?.toFixed(1) ?? 'failed'} ms; then ${lat.slice(1, 3).map((x) => x?.toFixed(0)).join(', ')} ms`)
      line('after the first 3', after)
      return { build_ms: build, first_ms: lat[0], after_first_3: after, all: lat }
    })
    results.template = { ...r, ratio_p50_after_first_3: ratios('template, after the first 3', r.docker.after_first_3, r.kubernetes.after_first_3),
      ratio_first: r.kubernetes.first_ms / r.docker.first_ms }
    note(`  first create: docker ${r.docker.first_ms?.toFixed(0)} ms, kubernetes ${r.kubernetes.first_ms?.toFixed(0)} ms`)
    printPhases(r)
  }
  results.load_end = os.loadavg()
  note(`load average at the end: ${results.load_end.map((l) => l.toFixed(1)).join(' ')}`)
  if (opt.json) console.log(JSON.stringify(results, null, 2))
  if (opt.out) writeFileSync(opt.out, JSON.stringify(results, null, 2) + '\n')
} catch (e) {
  failed = true
  console.error(e)
  for (const { key, srv } of engines) console.error(`--- ${key} server log tail:\n${await srv.logTail(30)}`)
} finally {
  for (const { e, name } of templates) await e.srv.api(`/templates/${name}`, { method: 'DELETE' }).catch(() => {})
  for (const e of engines) {
    use(e)
    const problems = (await e.srv.dispose()).filter((p) => !p.includes('(warm pool?)'))
    if (problems.length) console.error(`bench: ${e.key}: ${problems.join('; ')}`)
  }
}
process.exit(failed ? 1 : 0)
