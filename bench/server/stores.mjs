// stores.mjs: create → first command on the PostgreSQL store against SQLite, in one run, through
// the official e2b SDK (2.51). Two `warren serve` on the same Docker engine, each with its own
// port, state dir and container label (test/e2e/server/harness.mjs): one with `--store` on a
// database of its own in the PostgreSQL of WARREN_STORE (the harness makes it, and drops it at
// the end), one on its SQLite file; the creates alternate between them, so both see the same
// moments of a shared, noisy machine, and the p50 difference is the store's.
//
//   WARREN_STORE=postgres://... node bench/server/stores.mjs [--n 30] [--serve-arg=--warm-pool=0 ...] [--json]
//
// (bench/server/stores.sh runs it on scripts/ensure-postgres.sh's PostgreSQL.)
// Prints, for each store, Sandbox.create() → first commands.run('true') resolved and
// Sandbox.create() alone (p50/p95), the p50 differences, the mean of each step of the creates by
// the servers' own timing (warren_create_phase_seconds: pool claims, and the cold creates of the
// warm-up), and the load average before and after.
import os from 'node:os'
import { parseArgs } from 'node:util'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { removeSandboxContainers, sdk } from '../server.mjs'
import { reporter } from '../stats.mjs'

const { values: opt } = parseArgs({
  options: {
    n: { type: 'string', default: '30' },
    json: { type: 'boolean', default: false },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})
const pgURL = process.env.WARREN_STORE
if (!pgURL) throw new Error('WARREN_STORE is unset: give the URL of a PostgreSQL database to make others from (scripts/ensure-postgres.sh prints one)')

const { Sandbox } = await sdk('e2b')
delete process.env.E2B_DEBUG
const now = () => performance.now()
const results = { load_before: os.loadavg() }
const report = reporter(results, 52, opt.json)
const note = (m) => !opt.json && console.log(m)

// The harness gives a server a PostgreSQL database when WARREN_STORE is set as it starts, and
// drops it (through WARREN_STORE) at its dispose.
const stores = []
async function start(name, store) {
  if (store === 'postgres') process.env.WARREN_STORE = pgURL
  else delete process.env.WARREN_STORE
  const server = new WarrenServer({ name: `warren-stores-${name}-${process.pid}`, args: opt['serve-arg'] })
  stores.push({ name, server, totals: [], creates: [] })
  await server.start()
}

/** createAndRun times a create and its first command on one server, then kills the sandbox. */
async function createAndRun(s) {
  const env = s.server.sdkEnv
  const conn = { apiKey: env.E2B_API_KEY, domain: env.E2B_DOMAIN, apiUrl: env.E2B_API_URL, sandboxUrl: env.E2B_SANDBOX_URL }
  const t0 = now()
  const sbx = await Sandbox.create({ ...conn, metadata: { bench: s.server.name } })
  const t1 = now()
  await sbx.commands.run('true')
  const total = now() - t0
  await sbx.kill()
  return { create: t1 - t0, total }
}

/**
 * phaseMeans prints the mean of each step of the creates each server made (its GET /metrics,
 * warren_create_phase_seconds), side by side: where the stores' difference goes.
 */
async function phaseMeans() {
  const means = {}
  for (const s of stores) {
    const text = await (await s.server.api('/metrics')).text()
    for (const m of text.matchAll(/^warren_create_phase_seconds_(sum|count)\{path="(\w+)",phase="(\w+)"\} (\S+)$/gm)) {
      const [, kind, path, phase, v] = m
      const k = `${path} ${phase}`
      means[k] ??= {}
      means[k][s.name] ??= {}
      means[k][s.name][kind] = Number(v)
    }
  }
  results.phase_mean_ms = {}
  note('mean of each step of the creates (ms; warren_create_phase_seconds):')
  for (const [k, by] of Object.entries(means)) {
    const ms = Object.fromEntries(stores.map((s) => [s.name, by[s.name]?.count ? (1000 * by[s.name].sum) / by[s.name].count : NaN]))
    results.phase_mean_ms[k] = ms
    if (!Object.values(ms).some((v) => v >= 0.1)) continue
    note(`  ${k.padEnd(30)} ${stores.map((s) => `${s.name} ${ms[s.name].toFixed(1)}`).join('  ')}`)
  }
}

try {
  await start('postgres', 'postgres')
  await start('sqlite', 'sqlite')
  note(`warren serve ${opt['serve-arg'].join(' ')} on PostgreSQL vs SQLite — ${new Date().toISOString()} — ${os.cpus().length} × ${os.cpus()[0]?.model}, load ${results.load_before.map((l) => l.toFixed(1)).join(' ')}`)
  // warm-up: the first create of each pays for image and page-cache warm-up
  for (const s of stores) await createAndRun(s)
  for (let i = 0; i < Number(opt.n); i++) {
    // Alternate which goes first, so neither always follows the other's kill.
    for (const s of i % 2 ? [...stores].reverse() : stores) {
      const r = await createAndRun(s)
      s.totals.push(r.total)
      s.creates.push(r.create)
    }
  }
  for (const s of stores) {
    report(`${s.name}_create_first_cmd`, `${s.name}: create → first run('true')`, s.totals)
    report(`${s.name}_create_only`, `${s.name}:   of which Sandbox.create()`, s.creates)
  }
  results.p50_difference_ms = results.postgres_create_first_cmd.p50 - results.sqlite_create_first_cmd.p50
  results.create_p50_difference_ms = results.postgres_create_only.p50 - results.sqlite_create_only.p50
  await phaseMeans()
  results.load_after = os.loadavg()
  note(`${'PostgreSQL − SQLite, p50'.padEnd(52)} create → first command ${results.p50_difference_ms.toFixed(1)} ms, create ${results.create_p50_difference_ms.toFixed(1)} ms`)
  note(`load average after: ${results.load_after.map((l) => l.toFixed(1)).join(' ')}`)
} catch (e) {
  console.error(`bench failed: ${e.stack}`)
  for (const s of stores) console.error(`--- ${s.name} server log tail:\n${await s.server.logTail(30)}`)
  process.exitCode = 1
} finally {
  process.env.WARREN_STORE = pgURL
  for (const s of stores) {
    await removeSandboxContainers(s.server)
    const problems = await s.server.dispose()
    if (problems.length) console.error(`bench (${s.name}): ${problems.join('; ')}`)
  }
}
if (opt.json) console.log(JSON.stringify(results, null, 2))
