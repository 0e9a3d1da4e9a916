// fairness.mjs: does one team's burst hold up another team's creates? Against its own
// `warren serve`, through the official e2b SDK, in one run:
//   unloaded  team B creates a sandbox every second (--n of them): Sandbox.create() → first
//             commands.run('true'), what a user waits for; each killed once up;
//   loaded    team A bursts --burst creates at once (each killed once up, so that the machine
//             holds no more than the engine is starting) while team B goes on creating one a
//             second until A's burst is over (at least --n);
// and prints B's p50 and max in both, their ratio (and, apart, the p50 of the create and of the
// first command), and A's burst: its time to the last sandbox,
// and its failures (a create refused when it waited past the server's 30 s, or its queue full).
// Team B runs in a process of its own, as another team's client would: in one process its
// requests would queue behind A's in the client's own connection pool, not at the server.
// --serve-arg passes flags to warren serve (e.g. --serve-arg=--warm-pool=0); --bin runs another
// warren binary (a build of another commit: before and after).
//
//   node bench/fairness/fairness.mjs [--burst 200] [--n 20] [--json] [--bin PATH] [--serve-arg=...]
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
    // Internal: run as team B's client with this key until the file --until names exists.
    'as-b': { type: 'string' },
    until: { type: 'string' },
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
// The sandboxes' metadata, for removeSandboxContainers; team B's process gets it from the env.
const meta = { bench: process.env.FAIRNESS_BENCH ?? '' }

/**
 * once creates a sandbox of apiKey's team, runs a command, kills it: the time to the command
 * (ms), and of it the create's (create) and the command's (command).
 */
async function once(apiKey) {
  const t0 = now()
  const sbx = await Sandbox.create({ apiKey, metadata: meta, retries: 0 })
  const t1 = now()
  await sbx.commands.run('true')
  const t2 = now()
  sbx.kill().catch(() => {})
  return { ms: t2 - t0, create: t1 - t0, command: t2 - t1 }
}

/** everySecond creates one sandbox a second until done() and at least n: times, errors. */
async function everySecond(apiKey, done) {
  const lat = []
  const creates = []
  const commands = []
  const errors = []
  const pending = []
  for (let i = 0; i < n || !done(); i++) {
    pending.push(once(apiKey).then((t) => {
      lat.push(t.ms)
      creates.push(t.create)
      commands.push(t.command)
    }, (e) => errors.push(String(e?.message ?? e))))
    await sleep(1000)
  }
  await Promise.all(pending)
  return { lat, creates, commands, errors }
}

if (opt['as-b']) {
  const { existsSync } = await import('node:fs')
  console.log(JSON.stringify(await everySecond(opt['as-b'], () => !opt.until || existsSync(opt.until))))
  process.exit(0)
}

// A's queued creates each reserve their memory from admission on, so a burst of 200 passes the
// machine's memory (--server-memory-mb) and most of it would be refused at once as a full
// server: the benchmark measures the gate's turns, with that check off unless --serve-arg says.
const server = new WarrenServer({ name: `warren-fairness-${process.pid}`, args: ['--server-memory-mb=0', ...opt['serve-arg']], ...(opt.bin ? { bin: opt.bin } : {}) })
await server.start()
Object.assign(process.env, server.sdkEnv)
delete process.env.E2B_DEBUG
meta.bench = server.name

/** key makes a key of a new team on the server's store. */
async function key(team) {
  const { stdout } = await run(server.bin, ['keys', 'create', '--team', `${team}-${process.pid}`, ...server.storeFlags])
  return stdout.trim()
}

/** teamB runs team B's client in a process of its own until the file until exists (none: n creates). */
async function teamB(apiKey, until) {
  const args = [new URL(import.meta.url).pathname, '--as-b', apiKey, '--n', String(n), ...(until ? ['--until', until] : [])]
  const { stdout } = await run(process.execPath, args, { env: { ...process.env, FAIRNESS_BENCH: server.name }, maxBuffer: 1 << 24 })
  return JSON.parse(stdout.trim().split('\n').pop())
}

/** parts is the p50 of B's creates and of their first commands, apart. */
const parts = (b) => ({ create_p50: stat(b.creates).p50, command_p50: stat(b.commands).p50 })

const results = {}
const scratch = await mkdtemp(join(tmpdir(), 'fairness-'))
try {
  const [a, b] = await Promise.all([key('a'), key('b')])
  await once(b) // the first create of the server warms its image caches (this process's B key)

  note(`team B alone: ${n} creates, one a second`)
  const alone = await teamB(b)
  results.b_unloaded = stat(alone.lat)
  results.b_unloaded_parts = parts(alone)
  note(`  B unloaded   ${fmt(results.b_unloaded)}${alone.errors.length ? `  failures ${alone.errors.length}` : ''}`)

  note(`team A bursts ${burstSize} creates; team B goes on, one a second`)
  const until = join(scratch, 'burst-over')
  const t0 = now()
  const aErrors = []
  const burst = Promise.all(Array.from({ length: burstSize }, () => once(a).catch((e) => aErrors.push(String(e?.message ?? e)))))
    .then(async () => {
      results.a_burst_s = (now() - t0) / 1000
      await writeFile(until, '')
    })
  await sleep(200) // A's burst is queued first
  const loaded = await teamB(b, until)
  await burst
  results.b_loaded = stat(loaded.lat)
  results.b_loaded_parts = parts(loaded)
  results.b_failures = loaded.errors.length
  results.a_failures = aErrors.length
  results.a_errors = [...new Set(aErrors)].slice(0, 3)
  results.p50_ratio = results.b_loaded.p50 / results.b_unloaded.p50
  results.max_ratio = results.b_loaded.max / results.b_unloaded.p50
  note(`  B loaded     ${fmt(results.b_loaded)}${loaded.errors.length ? `  failures ${loaded.errors.length}: ${loaded.errors[0]}` : ''}`)
  note(`  B's create / first command, p50: ${results.b_unloaded_parts.create_p50.toFixed(1)} / ${results.b_unloaded_parts.command_p50.toFixed(1)} ms alone, ${results.b_loaded_parts.create_p50.toFixed(1)} / ${results.b_loaded_parts.command_p50.toFixed(1)} ms loaded`)
  note(`  B's p50 loaded/unloaded: ${results.p50_ratio.toFixed(2)}x; max loaded / p50 unloaded: ${results.max_ratio.toFixed(2)}x`)
  note(`  A's burst: ${results.a_burst_s.toFixed(1)} s for ${burstSize}, ${aErrors.length} failed${aErrors.length ? ` (${results.a_errors[0]})` : ''}`)
  if (opt.json) console.log(JSON.stringify(results, null, 2))
} finally {
  await rm(scratch, { recursive: true, force: true })
  await removeSandboxContainers(server).catch(() => {})
  const problems = await server.dispose()
  if (problems.length) console.error(`fairness: ${problems.join('; ')}`)
}
