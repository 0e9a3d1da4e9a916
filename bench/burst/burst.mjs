// burst.mjs: bursts of creates against `warren serve`, through the official e2b SDK, beside the
// engine's own floor measured in the same run.
//
//   node bench/burst/burst.mjs [--sizes 1,10,50] [--with-100] [--pause 30] [--json]
//                              [--serve-arg=--warm-pool=0 ...]
//
// For each burst size N it fires N × (Sandbox.create() → first commands.run('true')) at once,
// twice: a first burst, then, --pause seconds after the first burst's sandboxes are killed, a
// second one (what a pool that learns from the first should serve faster). Each burst prints
// p50/p95 and failures of the N, and beside them the floor: N × `docker run -d` of warren/base
// at once (a published port, as Warren's containers have), the engine alone. While bursts run,
// GET /metrics is sampled every 250 ms and the warm pool's ready containers over time are printed
// per burst (min → max → at the end), so a pool that drains or grows is visible.
//
// The server is private (test/e2e/server/harness.mjs: free port, fresh state dir, its own
// container label) and every sandbox and container the benchmark made is removed at the end.
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { parseArgs, promisify } from 'node:util'
import os from 'node:os'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { stat, fmt } from '../stats.mjs'

const { values: opt } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1,10,50' },
    'with-100': { type: 'boolean', default: false },
    pause: { type: 'string', default: '30' },
    json: { type: 'boolean', default: false },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})
const sizes = opt.sizes.split(',').map(Number)
if (opt['with-100'] && !sizes.includes(100)) sizes.push(100)

const require = createRequire(new URL('../../test/e2e/package.json', import.meta.url))
const { Sandbox } = await import(require.resolve('e2b'))
const run = promisify(execFile)
const now = () => performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const note = (m) => !opt.json && console.log(m)

const server = new WarrenServer({ name: `warren-burst-${process.pid}`, args: opt['serve-arg'] })
await server.start()
Object.assign(process.env, server.sdkEnv)
delete process.env.E2B_DEBUG
const meta = { bench: server.name }

// poolReady reads the warm pool's ready containers, summed over templates, from GET /metrics.
async function poolReady() {
  const r = await server.api("/metrics")
  const text = await r.text()
  let n = 0
  for (const m of text.matchAll(/^warren_warm_pool_ready\{[^}]*\} (\d+)$/gm)) n += Number(m[1])
  return n
}

// sampler records the pool's size every 250 ms until stopped.
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

async function createAndRun() {
  const t0 = now()
  const sbx = await Sandbox.create({ metadata: meta })
  await sbx.commands.run('true')
  return { sbx, ms: now() - t0 }
}

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

// floor: n × `docker run -d` of warren/base at once, each timed on its own.
async function floor(n) {
  const ids = []
  const lat = []
  let failures = 0
  await Promise.all(Array.from({ length: n }, async () => {
    const t0 = now()
    try {
      const { stdout } = await run('docker', ['run', '-d', '--label', `bench=${server.name}`, '-p', '127.0.0.1::49983',
        '--entrypoint', '/bin/sleep', 'warren/base', '600'])
      lat.push(now() - t0)
      ids.push(stdout.trim())
    } catch {
      failures++
    }
  }))
  if (ids.length) await run('docker', ['rm', '-f', ...ids])
  return { lat, failures }
}

const results = { sizes: {} }
const line = (label, s, failures) =>
  note(`${label.padEnd(34)} ${s.n ? fmt(s) : 'no successes'}  failures ${failures}`)
let failed = false
try {
  const [load] = os.loadavg()
  note(`warren serve ${opt['serve-arg'].join(' ')} bursts — ${new Date().toISOString()} — ${os.cpus().length} × ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, load ${load.toFixed(1)}`)
  // warm-up: the first create pays for page-cache warm-up
  await (await createAndRun()).sbx.kill()
  await sleep(2000)
  for (const n of sizes) {
    const out = {}
    for (const which of ['first', 'second']) {
      const b = await burst(n)
      const s = stat(b.lat)
      out[which] = { ...s, failures: b.failures, errors: b.errors, wall_ms: b.wall, pool: b.pool }
      line(`burst of ${n}, ${which}`, s, b.failures)
      const p = b.pool.filter(Number.isFinite)
      if (p.length) note(`${''.padEnd(34)} pool ready: start ${p[0]} min ${Math.min(...p)} max ${Math.max(...p)} end ${p.at(-1)}; wall ${b.wall.toFixed(0)} ms`)
      if (b.errors.length) note(`${''.padEnd(34)} errors: ${b.errors.join(' | ')}`)
      if (which === 'first') await sleep(Number(opt.pause) * 1000)
    }
    const f = await floor(n)
    const fs = stat(f.lat)
    out.floor = { ...fs, failures: f.failures }
    line(`  floor: ${n} × docker run -d`, fs, f.failures)
    if (fs.n && out.second.n) note(`${''.padEnd(34)} second burst p50 / floor p50 = ${(out.second.p50 / fs.p50).toFixed(2)}`)
    results.sizes[n] = out
    await sleep(Number(opt.pause) * 1000)
  }
  results.pool_at_end = await poolReady()
  note(`pool ready after the last pause: ${results.pool_at_end}`)
  if (opt.json) console.log(JSON.stringify(results, null, 2))
} catch (e) {
  failed = true
  console.error(e)
  console.error(`--- server log tail:\n${await server.logTail(40)}`)
} finally {
  await server.purge()
  await server.stop()
  await server.removeContainers()
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=bench=${server.name}`])
  if (stdout.trim()) await run('docker', ['rm', '-f', ...stdout.trim().split('\n')])
}
process.exit(failed ? 1 : 0)
