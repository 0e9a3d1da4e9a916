// desktop.mjs: what a computer-use agent waits for on a desktop sandbox, with the official
// @e2b/desktop SDK against servers of its own (test/e2e/server/harness.mjs, on the engine that
// WARREN_ENGINE names: bench/desktop/run.sh, or test/e2e/kube-run.sh --exec for Kubernetes):
//   - Sandbox.create() → first screenshot(), cold (a server without a warm pool: the pod or
//     container starts and its desktop boots) and warm (a server whose pool learned the
//     template: the create claims a sandbox whose desktop is up);
//   - screenshot() latency on a running desktop;
//   - the memory of an idle desktop (the SDK's getMetrics(), from its cgroup), --settle seconds
//     after its first screenshot.
//   node bench/desktop/desktop.mjs [--n 5] [--shots 20] [--settle 30] [--json]
// Warm creates wait --refill seconds each for the pool to start the next one, so they measure a
// claim, not a start.
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { sdk } from '../server.mjs'
import { stat, fmt } from '../stats.mjs'

const { values: opt } = parseArgs({
  options: {
    n: { type: 'string', default: '5' },
    shots: { type: 'string', default: '20' },
    settle: { type: 'string', default: '30' },
    refill: { type: 'string', default: '25' },
    json: { type: 'boolean', default: false },
  },
})
const n = Number(opt.n)
const { Sandbox } = await sdk('@e2b/desktop')
const results = {}
const say = (...a) => opt.json || console.log(...a)

/** server starts a server with args and points the SDK at it. */
async function server(name, args) {
  const srv = new WarrenServer({ name: `${name}-${process.pid}`, args })
  await srv.start()
  Object.assign(process.env, srv.sdkEnv)
  delete process.env.E2B_DEBUG
  return srv
}

/** firstShot times Sandbox.create() → its first screenshot, and returns the sandbox. */
async function firstShot(times) {
  const t0 = performance.now()
  const d = await Sandbox.create({ timeoutMs: 600_000 })
  await d.screenshot()
  times.push(performance.now() - t0)
  return d
}

/** memUsed waits for a metrics sample of d taken after since, and returns its memory in MB. */
async function memUsed(d, since) {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const m = (await d.getMetrics()).filter((s) => new Date(s.timestamp).getTime() >= since).at(-1)
    if (m) return m.memUsed / 1e6
    await sleep(2000)
  }
  throw new Error(`no metrics of sandbox ${d.sandboxId} within 60 s`)
}

const cold = await server('bench-desktop-cold', ['--warm-pool', '0'])
try {
  const times = []
  let last
  for (let i = 0; i < n; i++) {
    if (last) await last.kill()
    last = await firstShot(times)
  }
  results.coldFirstShot = stat(times)
  say(`create → first screenshot, cold  ${fmt(results.coldFirstShot)}`)

  const shots = []
  for (let i = 0; i < Number(opt.shots); i++) {
    const t0 = performance.now()
    await last.screenshot()
    shots.push(performance.now() - t0)
  }
  results.screenshot = stat(shots)
  say(`screenshot()                     ${fmt(results.screenshot)}`)

  await sleep(Number(opt.settle) * 1000)
  results.idleMemMB = await memUsed(last, Date.now())
  say(`idle desktop's memory            ${results.idleMemMB.toFixed(0)} MB (${opt.settle} s after its first screenshot)`)
  await last.kill()
} finally {
  await cold.dispose()
}

const warm = await server('bench-desktop-warm', ['--warm-pool', 'auto'])
try {
  const times = []
  // The first create teaches the pool the template; the next ones claim from it.
  await (await firstShot([])).kill()
  for (let i = 0; i < n; i++) {
    await sleep(Number(opt.refill) * 1000)
    await (await firstShot(times)).kill()
  }
  results.warmFirstShot = stat(times)
  say(`create → first screenshot, warm  ${fmt(results.warmFirstShot)}`)
} finally {
  await warm.dispose()
}
if (opt.json) console.log(JSON.stringify(results, null, 2))
