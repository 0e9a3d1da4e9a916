// burst.mjs: creates against `warren serve`, through the official e2b SDK, beside the engine's
// own floor measured in the same run: bursts, one at a time, templates of the user's own, first
// creates of fresh images, and where a create's time goes.
//
//   node bench/burst/burst.mjs [--only bursts,sequential,template,image,first,phases]
//        [--sizes 1,10,50] [--with-100] [--pause 30] [--n 20] [--gvisor] [--baseline DIR] [--json]
//        [--serve-arg=--warm-pool=0 ...]
//
// Every part times Sandbox.create() → first commands.run('true'), what a user waits for:
//   bursts      for each size N, N at once, twice: a first burst, then, --pause seconds after
//               its sandboxes are killed, a second (what a pool that learns from the first should
//               serve faster); then the floor, N × `docker run -d` of warren/base at once (with a
//               published port, as Warren's containers have). GET /metrics is sampled every
//               250 ms while a burst runs: the pools' ready containers over it. Every 5 s of
//               each pause the pool is marked: its ready containers, the memory its budget
//               counts for them (warren_warm_pool_memory_bytes) and what its containers
//               measurably hold (PSS, bench/containers.mjs): the pool's size and memory over
//               time, in the JSON's pool_timeline.
//   sequential  --n creates one at a time back to back (no pause), then --n with a pause of
//               1 s before each; beside them --n `docker run -d` one at a time.
//   template    a template of the user's own, built with Template.build() from warren/base
//               (unique name, deleted at the end): --n creates of it one at a time, 1 s apart;
//               the first (no pool has it yet), and the p50 after the first 3.
//   image       the same for a local image used as a template (a fresh tag of warren/base).
//   first       --n first-ever creates of an image: each of a fresh image (warren/base with a
//               new label, so a new image ID that no pool or cache has seen), beside the floor,
//               `docker run -d` of another fresh image, alternating; and beside the same on the
//               sandbox network (WARREN_NETWORK, default warren0), whose containers the engine
//               also gives its embedded DNS.
//   phases      where a create's time goes: --n creates one at a time (1 s apart) on this
//               server (pooled) and on a second one with --warm-pool=0 (cold), and the p50 and
//               mean of each phase, from the histograms warren_create_phase_seconds of
//               GET /metrics (internal/phases). --baseline DIR (a bin/ of other binaries:
//               warren, warren-agent) adds the same two on servers of those, a create on each
//               in turn: before and after in one run.
// --gvisor runs it all on the gVisor engine of scripts/setup-gvisor.sh (its socket, sandboxes
// under runsc, the floor's containers too): start that engine first.
//
// The servers are private (test/e2e/server/harness.mjs: free port, fresh state dir, own
// container label) and every sandbox, template, image and container the benchmark made is
// removed at the end.
import { execFile } from 'node:child_process'
import { parseArgs, promisify } from 'node:util'
import os from 'node:os'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { removeSandboxContainers, sdk, startServer } from '../server.mjs'
import { stat, fmt } from '../stats.mjs'
import { containers, memory, pssKB } from '../containers.mjs'
import { phaseOrder, phaseStats, phaseBounds0 } from '../phases.mjs'

const parts = ['bursts', 'sequential', 'template', 'image', 'first', 'phases']
const { values: opt } = parseArgs({
  options: {
    only: { type: 'string', default: parts.join(',') },
    sizes: { type: 'string', default: '1,10,50' },
    'with-100': { type: 'boolean', default: false },
    pause: { type: 'string', default: '30' },
    n: { type: 'string', default: '20' },
    gvisor: { type: 'boolean', default: false },
    baseline: { type: 'string' },
    json: { type: 'boolean', default: false },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})
const only = opt.only.split(',')
for (const p of only) if (!parts.includes(p)) throw new Error(`--only: no part '${p}' (parts: ${parts.join(', ')})`)
const sizes = opt.sizes.split(',').map(Number)
if (opt['with-100'] && !sizes.includes(100)) sizes.push(100)
const count = Number(opt.n)
if (!(count >= 4)) throw new Error('--n must be 4 or more')

// The gVisor engine of scripts/setup-gvisor.sh, as test.sh's gVisor suite runs the server on it.
const gvisorEnv = {
  DOCKER_HOST: 'unix:///run/warren-gvisor/docker.sock',
  WARREN_RUNTIME: 'gvisor',
  WARREN_NETWORK: 'wgvsb',
}
if (opt.gvisor) Object.assign(process.env, gvisorEnv)
const floorRuntime = opt.gvisor ? ['--runtime', 'runsc'] : []

const { Sandbox, Template } = await sdk('e2b')
const run = promisify(execFile)
const now = () => performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const note = (m) => !opt.json && console.log(m)
const tag = `burstbench-${process.pid}`

// Bursts of 100 (--with-100) reserve more than this machine's memory from admission on: the
// benchmark measures the engine and the pool, with the full-server check (--server-memory-mb) off.
const server = await startServer({ name: `warren-burst-${process.pid}`, args: ['--server-memory-mb=0', ...opt['serve-arg']] })
const meta = { bench: server.name }

// metrics returns the text of a server's GET /metrics.
async function metrics(srv = server) {
  const r = await srv.api('/metrics')
  if (!r.ok) throw new Error(`GET /metrics: ${r.status} ${await r.text()}`)
  return r.text()
}

// poolState reads the warm pool from GET /metrics, summed over templates: its ready containers,
// the memory its budget counts for them (MiB, an estimate per container) and the budget.
async function poolState() {
  const text = await metrics()
  const sum = (name) => [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)$`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0)
  return {
    ready: sum('warren_warm_pool_ready'),
    budget_counts_mib: sum('warren_warm_pool_memory_bytes') / 2 ** 20,
    budget_mib: sum('warren_warm_pool_memory_budget_bytes') / 2 ** 20,
  }
}

const poolReady = async () => (await poolState()).ready

// poolMemory measures what the pool's containers hold on this host (PSS of each container's
// processes, shim and proxy, bench/containers.mjs), in MiB; called only while no sandbox of the
// benchmark is alive, so that every container of the server is a pooled one.
async function poolMemory() {
  const cs = await memory(await containers(server.name, new Set()))
  return { containers: cs.length, pss_mib: cs.reduce((n, c) => n + pssKB(c), 0) / 1024 }
}

// sampler records the pool's ready containers every 250 ms until stopped.
function sampler() {
  const xs = []
  let on = true
  const loop = (async () => {
    while (on) {
      xs.push(await poolReady().catch(() => NaN))
      await sleep(250)
    }
  })()
  return async () => {
    on = false
    await loop
    return xs
  }
}

// timeline is the pool over the whole run: its state and measured memory at the start, every
// 5 s of each pause between bursts (when no sandbox is alive), and at the end.
const timeline = []
const t00 = now()
async function mark(at) {
  const [st, mem] = await Promise.all([poolState(), poolMemory()])
  const p = { t_s: Math.round((now() - t00) / 100) / 10, at, ...st, measured_containers: mem.containers, measured_pss_mib: mem.pss_mib }
  timeline.push(p)
  return p
}

// pauseWatching waits ms, marking the pool every 5 s, and prints the first and last marks.
async function pauseWatching(ms, at) {
  const end = now() + ms
  const first = await mark(`${at}, pause start`)
  let last = first
  while (now() < end - 100) {
    await sleep(Math.min(5000, end - now()))
    last = await mark(now() >= end - 100 ? `${at}, pause end` : at)
  }
  const show = (p) => `${p.ready} ready, ${p.measured_pss_mib.toFixed(0)} MiB measured (${p.measured_containers} containers), ${p.budget_counts_mib.toFixed(0)} MiB counted`
  note(`${''.padEnd(40)} pool over the pause: ${show(first)} → ${show(last)}`)
}

async function createAndRun(template) {
  const t0 = now()
  const sbx = template ? await Sandbox.create(template, { metadata: meta }) : await Sandbox.create({ metadata: meta })
  await sbx.commands.run('true')
  return { sbx, ms: now() - t0 }
}

// attempt runs one create → first command of template and kills the sandbox; it returns the
// time, or undefined after adding the error to errors: one create that fails is counted, it
// does not end the benchmark.
async function attempt(errors, template) {
  try {
    const r = await createAndRun(template)
    await r.sbx.kill()
    return r.ms
  } catch (e) {
    errors.push(String(e?.message ?? e))
    return undefined
  }
}

// series runs n creates of template one at a time, waiting pauseMs before each, each sandbox
// killed before the next create: their times in order (undefined for a failure), and the
// errors.
async function series(n, pauseMs, template) {
  const lat = []
  const errors = []
  for (let i = 0; i < n; i++) {
    if (pauseMs) await sleep(pauseMs)
    lat.push(await attempt(errors, template))
  }
  return { lat, errors }
}

// summary is stat of the times that succeeded, with the failures and their distinct errors.
const summary = (lat, errors) => ({ ...stat(lat.filter(Number.isFinite)), failures: errors.length, errors: [...new Set(errors)].slice(0, 3) })

async function burst(n) {
  const stop = sampler()
  const t0 = now()
  const rs = await Promise.allSettled(Array.from({ length: n }, () => createAndRun()))
  const wall = now() - t0
  const pool = await stop()
  const ok = rs.filter((r) => r.status === 'fulfilled').map((r) => r.value)
  const errs = rs.filter((r) => r.status === 'rejected').map((r) => String(r.reason?.message ?? r.reason))
  await Promise.allSettled(ok.map((r) => r.sbx.kill()))
  return { lat: ok.map((r) => r.ms), failures: errs.length, errors: [...new Set(errs)].slice(0, 3), wall, pool }
}

// sandboxNetwork is the network the server puts its sandboxes on (warren serve --network).
const sandboxNetwork = process.env.WARREN_NETWORK || 'warren0'

// dockerRun times one `docker run -d` of image (a published port, as Warren's containers have),
// on the engine's default network or another, and returns the container's ID with it.
async function dockerRun(image, network) {
  const t0 = now()
  const { stdout } = await run('docker', ['run', '-d', ...floorRuntime, '--label', `bench=${server.name}`,
    ...(network ? ['--network', network] : []), '-p', '127.0.0.1::49983', '--entrypoint', '/bin/sleep', image, '600'])
  return { ms: now() - t0, id: stdout.trim() }
}

// floor: n × `docker run -d` of warren/base at once, each timed on its own.
async function floor(n) {
  const rs = await Promise.allSettled(Array.from({ length: n }, () => dockerRun('warren/base')))
  const ok = rs.filter((r) => r.status === 'fulfilled').map((r) => r.value)
  if (ok.length) await run('docker', ['rm', '-f', ...ok.map((r) => r.id)])
  return { lat: ok.map((r) => r.ms), failures: n - ok.length }
}

// floorSeries: n × `docker run -d` one at a time, each removed before the next.
async function floorSeries(n, image = () => 'warren/base', network) {
  const lat = []
  for (let i = 0; i < n; i++) {
    const r = await dockerRun(image(i), network)
    lat.push(r.ms)
    await run('docker', ['rm', '-f', r.id])
  }
  return lat
}

// freshImage builds warren/base with a label of its own: a new image ID, no new layer.
async function freshImage(name) {
  const p = run('docker', ['build', '-q', '-t', name, '-'])
  p.child.stdin.end(`FROM warren/base\nLABEL burstbench.image="${name}"\n`)
  await p
  images.push(name)
  return name
}

// printPhases prints a table: a row per phase, a column per run (p50 / mean in ms), then the
// runs' create → first command p50 and how many of their creates took their path.
function printPhases(phases, keys) {
  const cell = (s) => (s ? `${s.p50_ms < phaseBounds0 ? `<${phaseBounds0}` : s.p50_ms.toFixed(1)} / ${s.mean_ms.toFixed(1)}` : '–')
  const names = [...new Set(keys.flatMap((k) => Object.keys(phases[k].phases)))]
    .sort((x, y) => phaseOrder.indexOf(x) - phaseOrder.indexOf(y))
  note(`phases, p50 / mean ms   ${keys.map((k) => k.padStart(18)).join('')}`)
  for (const p of names) note(`  ${p.padEnd(20)} ${keys.map((k) => cell(phases[k].phases[p]).padStart(18)).join('')}`)
  note(`  ${'create → first cmd'.padEnd(20)} ${keys.map((k) => `p50 ${phases[k].create_to_first_cmd.p50?.toFixed(1) ?? '–'}`.padStart(18)).join('')}`)
  const tried = (c) => c.n + c.failures
  note(`  ${'creates on the path'.padEnd(20)} ${keys.map((k) => `${phases[k].phases.total?.n ?? 0} of ${tried(phases[k].create_to_first_cmd)}`.padStart(18)).join('')}`)
  note(`  ${'failures'.padEnd(20)} ${keys.map((k) => String(phases[k].create_to_first_cmd.failures).padStart(18)).join('')}`)
}

const images = [] // every image the benchmark tagged or built, removed at the end
const templates = [] // every template it built, deleted at the end
const results = { engine: opt.gvisor ? 'gvisor' : 'runc', parts: only, load_start: os.loadavg() }
const line = (label, s, failures = 0) =>
  note(`${label.padEnd(40)} ${s.n ? fmt(s) : 'no successes'}  failures ${failures}`)
let failed = false
const others = [] // the servers the phases part starts
try {
  note(`warren serve ${opt['serve-arg'].join(' ')} (${results.engine}) — ${new Date().toISOString()} — ${os.cpus().length} × ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  // warm-up: the first create pays for page-cache warm-up
  await (await createAndRun()).sbx.kill()
  await sleep(2000)
  const start = await mark('start')
  results.pool_budget_mib = start.budget_mib
  note(`pool at the start: ${start.ready} ready, ${start.measured_pss_mib.toFixed(0)} MiB measured; budget beyond the floors ${results.pool_budget_mib} MiB`)

  if (only.includes('bursts')) {
    results.sizes = {}
    for (const n of sizes) {
      const out = {}
      for (const which of ['first', 'second']) {
        const b = await burst(n)
        const s = stat(b.lat)
        out[which] = { ...s, failures: b.failures, errors: b.errors, wall_ms: b.wall, pool: b.pool }
        line(`burst of ${n}, ${which}`, s, b.failures)
        const p = b.pool.filter(Number.isFinite)
        if (p.length) note(`${''.padEnd(40)} pool ready: start ${p[0]} min ${Math.min(...p)} max ${Math.max(...p)} end ${p.at(-1)}; wall ${b.wall.toFixed(0)} ms`)
        if (b.errors.length) note(`${''.padEnd(40)} errors: ${b.errors.join(' | ')}`)
        if (which === 'first') await pauseWatching(Number(opt.pause) * 1000, `after the first burst of ${n}`)
      }
      const f = await floor(n)
      const fs = stat(f.lat)
      out.floor = { ...fs, failures: f.failures }
      line(`  floor: ${n} × docker run -d`, fs, f.failures)
      if (fs.n && out.second.n) note(`${''.padEnd(40)} second burst p50 / floor p50 = ${(out.second.p50 / fs.p50).toFixed(2)}`)
      results.sizes[n] = out
      await pauseWatching(Number(opt.pause) * 1000, `after the floor of ${n}`)
    }
    results.pool_at_end = await poolReady()
    note(`pool ready after the last pause: ${results.pool_at_end}`)
  }

  if (only.includes('sequential')) {
    const a = await series(count, 0)
    const b2b = summary(a.lat, a.errors)
    line(`one at a time, back to back (n=${count})`, b2b, b2b.failures)
    const b = await series(count, 1000)
    const paused = summary(b.lat, b.errors)
    line('one at a time, 1 s apart', paused, paused.failures)
    const f = stat(await floorSeries(count))
    line('  floor: docker run -d one at a time', f)
    results.sequential = { back_to_back: b2b, paused, floor: f }
  }

  // own: creates of a template of the user's own, one at a time, 1 s apart: the first, and the
  // p50 after the first 3 (by then the template's learned pool serves them).
  const own = async (key, label, template) => {
    const { lat, errors } = await series(count, 1000, template)
    const after = summary(lat.slice(3), errors)
    results[key] = { first_ms: lat[0], after_first_3: after, all: lat }
    note(`${label}: first create ${lat[0]?.toFixed(1) ?? 'failed'} ms`)
    line(`  after the first 3`, after, errors.length)
    if (errors.length) note(`${''.padEnd(40)} errors: ${after.errors.join(' | ')}`)
  }
  if (only.includes('template')) {
    const name = `${tag}-tpl`
    templates.push(name)
    const t0 = now()
    await Template.build(Template().fromImage('warren/base').runCmd(`echo ${tag} > /tmp/burstbench`), name)
    note(`Template.build() of ${name}: ${(now() - t0).toFixed(0)} ms`)
    await own('template', `template built with Template.build() (n=${count})`, name)
  }
  if (only.includes('image')) {
    const name = `${tag}-img:v1`
    await run('docker', ['tag', 'warren/base', name])
    images.push(name)
    await own('image', `local image ${name} as a template (n=${count})`, name)
  }

  if (only.includes('first')) {
    const m0 = await metrics()
    const w = []
    const errors = []
    const f = []
    const fn = []
    for (let i = 0; i < count; i++) {
      w.push(await attempt(errors, await freshImage(`${tag}-first:w${i}`)))
      const other = await freshImage(`${tag}-first:f${i}`)
      f.push(...(await floorSeries(1, () => other)))
      const onNet = await freshImage(`${tag}-first:n${i}`)
      fn.push(...(await floorSeries(1, () => onNet, sandboxNetwork)))
    }
    const ws = summary(w, errors)
    const fs = stat(f)
    const fns = stat(fn)
    line(`first create of a fresh image (n=${count})`, ws, ws.failures)
    if (errors.length) note(`${''.padEnd(40)} errors: ${ws.errors.join(' | ')}`)
    line('  floor: docker run -d of a fresh image', fs)
    note(`${''.padEnd(40)} p50 / floor p50 = ${(ws.p50 / fs.p50).toFixed(2)}`)
    line(`  the same on the sandbox network ${sandboxNetwork}`, fns)
    note(`${''.padEnd(40)} p50 / its p50 = ${(ws.p50 / fns.p50).toFixed(2)}`)
    const ph = phaseStats(m0, await metrics()).cold ?? {}
    const names = Object.keys(ph).sort((x, y) => phaseOrder.indexOf(x) - phaseOrder.indexOf(y))
    note(`${''.padEnd(40)} its phases, p50 ms: ${names.map((p) => `${p} ${ph[p].p50_ms.toFixed(1)}`).join(', ')}`)
    results.first = {
      warren: ws, floor: fs, ratio_p50: ws.p50 / fs.p50,
      floor_sandbox_network: fns, ratio_sandbox_network_p50: ws.p50 / fns.p50, phases: ph,
    }
  }

  if (only.includes('phases')) {
    // Pooled creates on this server, cold ones on a second with --warm-pool=0, and with
    // --baseline the same on two servers of the baseline's binaries: one create on each in
    // turn, 1 s apart, so that all see the same machine.
    const extra = async (key, bin, args) => {
      const srv = new WarrenServer({ name: `warren-burst-${key}-${process.pid}`, args: ['--server-memory-mb=0', ...opt['serve-arg'], ...args],
        bin: bin && `${bin}/warren`, agentBin: bin && `${bin}/warren-agent` })
      await srv.start()
      others.push(srv)
      return srv
    }
    const runs = [{ key: 'pool', srv: server }, { key: 'cold', srv: await extra('cold', undefined, ['--warm-pool=0']) }]
    if (opt.baseline) {
      runs.push({ key: 'pool_before', srv: await extra('pool-before', opt.baseline, []) },
        { key: 'cold_before', srv: await extra('cold-before', opt.baseline, ['--warm-pool=0']) })
    }
    await sleep(3000) // the new servers' pools fill
    const m0 = await Promise.all(runs.map((r) => metrics(r.srv)))
    const lat = runs.map(() => [])
    const errs = runs.map(() => [])
    for (let i = 0; i < count; i++) {
      for (const [j, r] of runs.entries()) {
        await sleep(1000)
        Object.assign(process.env, r.srv.sdkEnv)
        lat[j].push(await attempt(errs[j], undefined))
      }
    }
    Object.assign(process.env, server.sdkEnv)
    results.phases = {}
    for (const [j, r] of runs.entries()) {
      const st = phaseStats(m0[j], await metrics(r.srv))
      const path = r.key.split('_')[0]
      results.phases[r.key] = { create_to_first_cmd: summary(lat[j], errs[j]), phases: st[path] ?? {}, other: st[path === 'pool' ? 'cold' : 'pool'] ?? {} }
    }
    printPhases(results.phases, runs.map((r) => r.key))
  }
  await mark('end')
  results.pool_timeline = timeline
  results.load_end = os.loadavg()
  note(`load average at the end: ${results.load_end.map((l) => l.toFixed(1)).join(' ')}`)
  if (opt.json) console.log(JSON.stringify(results, null, 2))
} catch (e) {
  failed = true
  console.error(e)
  console.error(`--- server log tail:\n${await server.logTail(40)}`)
} finally {
  for (const t of templates) await server.api(`/templates/${t}`, { method: 'DELETE' }).catch(() => {})
  for (const srv of [server, ...others]) {
    // dispose also removes what a server stopped partway leaves: its pool's containers and
    // firewall chains, which would refuse later sandboxes at those addresses.
    const problems = (await srv.dispose()).filter((p) => !p.includes('(warm pool?)'))
    if (problems.length) console.error(`bench: ${problems.join('; ')}`)
  }
  await removeSandboxContainers(server)
  if (images.length) await run('docker', ['rmi', ...images]).catch((e) => console.error(`bench: docker rmi: ${e.message}`))
}
process.exit(failed ? 1 : 0)
