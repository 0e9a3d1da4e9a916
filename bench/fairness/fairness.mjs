// fairness.mjs: does one team's burst hold up another team's creates? Against its own
// `warren serve`, through the official e2b SDK, in one run:
//   unloaded  team B creates a sandbox every second (--n of them): Sandbox.create() → first
//             commands.run('true'), what a user waits for; each killed once up;
//   loaded    team A bursts --burst creates at once (each killed once up, so that the machine
//             holds no more than the engine is starting) while team B goes on creating one a
//             second until A's burst is over (at least --n);
// and prints B's p50 and max in both, their ratio, and A's burst: its time to the last sandbox,
// and its failures (a create refused when it waited past the server's 30 s, or its queue full).
// --serve-arg passes flags to warren serve (e.g. --serve-arg=--warm-pool=0); --bin runs another
// warren binary (a build of another commit: before and after).
//
//   node bench/fairness/fairness.mjs [--burst 200] [--n 20] [--json] [--bin PATH] [--serve-arg=...]
import { execFile } from 'node:child_process'
import { parseArgs, promisify } from 'node:util'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { removeSandboxContainers, sdk } from '../server.mjs'
import { stat, fmt } from '../stats.mjs'

const { values: opt } = parseArgs({
  options: {
    burst: { type: 'string', default: '200' },
    n: { type: 'string', default: '20' },
    json: { type: 'boolean', default: false },
    bin: { type: 'string' },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})
const burstSize = Number(opt.burst)
const n = Number(opt.n)
const { Sandbox } = await sdk('e2b')
const run = promisify(execFile)
const now = () => performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const note = (m) => !opt.json && console.log(m)

const server = new WarrenServer({ name: `warren-fairness-${process.pid}`, args: opt['serve-arg'], ...(opt.bin ? { bin: opt.bin } : {}) })
await server.start()
Object.assign(process.env, server.sdkEnv)
delete process.env.E2B_DEBUG
const meta = { bench: server.name }

/** key makes a key of a new team on the server's store. */
async function key(team) {
  const { stdout } = await run(server.bin, ['keys', 'create', '--team', `${team}-${process.pid}`, ...server.storeFlags])
  return stdout.trim()
}

/** once creates a sandbox of apiKey's team, runs a command, kills it: the time to the command. */
async function once(apiKey) {
  const t0 = now()
  const sbx = await Sandbox.create({ apiKey, metadata: meta, retries: 0 })
  await sbx.commands.run('true')
  const ms = now() - t0
  sbx.kill().catch(() => {})
  return ms
}

/** everySecond creates one sandbox a second for team B until done() and at least n: times, errors. */
async function everySecond(apiKey, done) {
  const lat = []
  const errors = []
  const pending = []
  for (let i = 0; i < n || !done(); i++) {
    pending.push(once(apiKey).then((ms) => lat.push(ms), (e) => errors.push(String(e?.message ?? e))))
    await sleep(1000)
  }
  await Promise.all(pending)
  return { lat, errors }
}

const results = {}
try {
  const [a, b] = await Promise.all([key('a'), key('b')])
  await once(b) // the first create of the server warms its image caches

  note(`team B alone: ${n} creates, one a second`)
  const alone = await everySecond(b, () => true)
  results.b_unloaded = stat(alone.lat)
  note(`  B unloaded   ${fmt(results.b_unloaded)}${alone.errors.length ? `  failures ${alone.errors.length}` : ''}`)

  note(`team A bursts ${burstSize} creates; team B goes on, one a second`)
  let burstOver = false
  const t0 = now()
  const aErrors = []
  const burst = Promise.all(Array.from({ length: burstSize }, () => once(a).catch((e) => aErrors.push(String(e?.message ?? e)))))
    .then(() => { burstOver = true; results.a_burst_s = (now() - t0) / 1000 })
  await sleep(200) // A's burst is queued first
  const loaded = await everySecond(b, () => burstOver)
  await burst
  results.b_loaded = stat(loaded.lat)
  results.b_failures = loaded.errors.length
  results.a_failures = aErrors.length
  results.a_errors = [...new Set(aErrors)].slice(0, 3)
  results.p50_ratio = results.b_loaded.p50 / results.b_unloaded.p50
  results.max_ratio = results.b_loaded.max / results.b_unloaded.p50
  note(`  B loaded     ${fmt(results.b_loaded)}${loaded.errors.length ? `  failures ${loaded.errors.length}: ${loaded.errors[0]}` : ''}`)
  note(`  B's p50 loaded/unloaded: ${results.p50_ratio.toFixed(2)}x; max loaded / p50 unloaded: ${results.max_ratio.toFixed(2)}x`)
  note(`  A's burst: ${results.a_burst_s.toFixed(1)} s for ${burstSize}, ${aErrors.length} failed${aErrors.length ? ` (${results.a_errors[0]})` : ''}`)
  if (opt.json) console.log(JSON.stringify(results, null, 2))
} finally {
  await removeSandboxContainers(server).catch(() => {})
  const problems = await server.dispose()
  if (problems.length) console.error(`fairness: ${problems.join('; ')}`)
}
