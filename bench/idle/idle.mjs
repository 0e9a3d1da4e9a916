// idle.mjs: what N idle sandboxes cost — memory per sandbox, the server's memory, listing them —
// against `warren serve` through the official e2b SDK.
//
//   node bench/idle/idle.mjs [--n 500] [--parallel 8] [--lists 30] [--settle 15] [--json]
//                            [--serve-arg=--warm-pool=0 ...]
//
// Under gVisor, on the second engine of scripts/setup-gvisor.sh, give the server a network of
// that engine's own (wgv*): DOCKER_HOST=unix:///run/warren-gvisor/docker.sock
// bench/idle/run.sh --n 20 --serve-arg=--runtime=gvisor --serve-arg=--network=wgvidle
//
// It creates N sandboxes of warren/base (`Sandbox.create()`, --parallel at a time, each with a
// first `commands.run('true')` so its agent has served a request), waits --settle seconds and
// then reads, on this host:
//
//   * per sandbox, the PSS (/proc/<pid>/smaps_rollup) of every process that exists for it: the
//     processes in its container's cgroup (the agent and its init under runc; runsc's sentry and
//     gofer under gVisor), its containerd shim (`containerd-shim-runc-v2 ... -id <container>`)
//     and its docker-proxy (the userland proxy of its published 127.0.0.1 agent port, matched by
//     the container's IP). PSS shares a page mapped by several processes among them, so the
//     agent binary's text, which every sandbox maps from one file, is counted once across all of
//     them, and the sums add up to what the sandboxes hold together;
//   * the server's RSS and PSS before the creates and with the N alive;
//   * listing them: Sandbox.list() of all (pages of 100, the SDK's largest), one raw
//     GET /v2/sandboxes?limit=100 page, and all of them by raw GETs, --lists times each;
//   * the creates' latency and their total wall time, and the load average at each step.
//
// A create that fails is counted, the run stops creating after 10 failures in a row and measures
// what it has, printing the first errors: the machine's limit. It also stops before a limit
// would hurt the rest of the machine: with the host's threads above 85% of kernel.pid_max, or
// less than 2 GiB of memory available. The server is private
// (test/e2e/server/harness.mjs: free port, fresh state dir, its own container label) and
// everything it made is removed at the end, also on failure or Ctrl-C. The server runs with
// --server-memory-mb=0: idle sandboxes use a few MiB of their 512, and the default admission (the
// machine's memory) would refuse the 48th create here (a --serve-arg after it overrides it).
import { createRequire } from 'node:module'
import { readFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import os from 'node:os'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { stat, fmt } from '../stats.mjs'
import { timeListings } from '../listing.mjs'
import { kbField, smaps, containers, memory, pssKB } from '../containers.mjs'

const { values: opt } = parseArgs({
  options: {
    n: { type: 'string', default: '500' },
    parallel: { type: 'string', default: '8' },
    lists: { type: 'string', default: '30' },
    settle: { type: 'string', default: '15' },
    json: { type: 'boolean', default: false },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})
const N = Number(opt.n)
const PAR = Number(opt.parallel)

const require = createRequire(new URL('../../test/e2e/package.json', import.meta.url))
const { Sandbox } = await import(require.resolve('e2b'))
const now = () => performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const note = (m) => !opt.json && console.log(m)
const mib = (kb) => kb / 1024
const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ')

const server = new WarrenServer({ name: `warren-idle-${process.pid}`, args: ['--server-memory-mb=0', ...opt['serve-arg']] })
const results = { n: N, parallel: PAR, serve_args: opt['serve-arg'], load: {} }

// cleanup removes everything the run made, once, whether it ended, failed or was interrupted;
// interrupted sets it first, so that no create starts after it.
let interrupted = false
const made = [] // the sandboxes created
let cleaning
function cleanup() {
  cleaning ??= (async () => {
    // The sandboxes first, PAR at a time (the harness's purge deletes one after another), then
    // dispose: DELETE whatever is left, stop the server, remove its containers and state dir.
    const t = now()
    const q = made.map((s) => s.sandboxId)
    const n = q.length
    await Promise.all(Array.from({ length: PAR }, async () => {
      while (q.length) await Sandbox.kill(q.pop()).catch(() => {})
    }))
    if (n) results.kill_all_s = (now() - t) / 1000
    const problems = await server.dispose().catch((e) => [e.message])
    for (const p of problems) console.error(`cleanup: ${p}`)
  })()
  return cleaning
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    console.error(`\n${sig}: removing the benchmark's sandboxes and server…`)
    interrupted = true
    await cleanup()
    process.exit(130)
  })
}

async function serverMem() {
  const pid = server.proc.pid
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  const m = await smaps(pid)
  return { rss: kbField(status, 'VmRSS'), pss: m?.pss ?? 0, threads: Number(status.match(/^Threads:\s+(\d+)/m)?.[1] ?? 0) }
}

/** The pids in use on the host and its limit: threads count against kernel.pid_max. */
async function pidsInUse() {
  const [max, loadavg] = await Promise.all([readFile('/proc/sys/kernel/pid_max', 'utf8'), readFile('/proc/loadavg', 'utf8')])
  return { threads: Number(loadavg.split(' ')[3].split('/')[1]), pid_max: Number(max) }
}

/**
 * machineLimit says why no more sandboxes should be made on this shared machine, or returns
 * undefined: the host's threads near kernel.pid_max (a fork anywhere on the machine would then
 * fail), or its available memory nearly gone.
 */
async function machineLimit() {
  const { threads, pid_max: max } = await pidsInUse()
  if (threads > 0.85 * max) return `host threads ${threads} > 85% of kernel.pid_max ${max}`
  const avail = await memAvailableKB()
  if (avail < 2 << 20) return `MemAvailable ${mib(avail).toFixed(0)} MiB < 2 GiB`
  return undefined
}

async function memAvailableKB() {
  return kbField(await readFile('/proc/meminfo', 'utf8'), 'MemAvailable')
}

const dist = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const at = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]
  return { n: s.length, mean: s.reduce((a, b) => a + b, 0) / (s.length || 1), p50: at(50), p95: at(95), min: s[0], max: s[s.length - 1] }
}
const fmtMiB = (d) => `mean ${mib(d.mean).toFixed(2)}  p50 ${mib(d.p50).toFixed(2)}  p95 ${mib(d.p95).toFixed(2)}  max ${mib(d.max).toFixed(2)} MiB`

let failed = false
try {
  await server.start()
  Object.assign(process.env, server.sdkEnv)
  delete process.env.E2B_DEBUG
  results.load.start = load()
  results.server_before = await serverMem()
  results.pids_before = await pidsInUse()
  const availBefore = await memAvailableKB()
  note(`server ${server.name} on ${server.url}; ${N} sandboxes, ${PAR} at a time; load ${results.load.start}`)
  note(`server before: RSS ${mib(results.server_before.rss).toFixed(1)} MiB, PSS ${mib(results.server_before.pss).toFixed(1)} MiB`)

  // Create N, PAR at a time.
  const lat = []
  const errors = []
  let next = 0
  let inARow = 0
  let stop = false
  const t0 = now()
  await Promise.all(Array.from({ length: PAR }, async () => {
    while (!stop && !interrupted && next < N) {
      const limit = await machineLimit()
      if (limit) {
        results.stopped_by = limit
        stop = true
        break
      }
      next++
      const t = now()
      try {
        const sbx = await Sandbox.create({ timeoutMs: 3_600_000, metadata: { bench: 'idle' } })
        made.push(sbx)
        await sbx.commands.run('true')
        lat.push(now() - t)
        inARow = 0
        if (made.length % 50 === 0) note(`  ${made.length} created, ${((now() - t0) / 1000).toFixed(0)} s, load ${load()}`)
      } catch (e) {
        errors.push({ alive: made.length, error: String(e?.message ?? e).slice(0, 300) })
        if (++inARow >= 10) stop = true
      }
    }
  }))
  const wall = now() - t0
  results.created = made.length
  results.create_wall_s = wall / 1000
  results.create = stat(lat)
  results.errors = errors.length
  results.first_errors = errors.slice(0, 5)
  results.load.created = load()
  note(`created ${made.length} of ${N} in ${(wall / 1000).toFixed(1)} s (${(made.length / (wall / 1000)).toFixed(1)}/s)` +
    (lat.length ? `; create → first run('true') ${fmt(results.create)}` : ''))
  if (results.stopped_by) note(`  stopped creating at ${made.length}: ${results.stopped_by}`)
  for (const e of results.first_errors) note(`  failed with ${e.alive} alive: ${e.error}`)
  if (errors.length > 5) note(`  … ${errors.length} failures in all`)
  if (made.length === 0) throw new Error('no sandbox was created')

  await sleep(Number(opt.settle) * 1000)
  results.load.measured = load()
  const cs = await containers(server.name, new Set(made.map((s) => s.sandboxId)))
  const mem = await memory(cs)
  const sbs = mem.filter((c) => !c.pooled)
  const pooled = mem.filter((c) => c.pooled)
  const total = pssKB
  results.pss_kb = {
    total: dist(sbs.map(total)),
    container: dist(sbs.map((c) => c.parts.container)),
    shim: dist(sbs.map((c) => c.parts.shim)),
    proxy: dist(sbs.map((c) => c.parts.proxy)),
    container_anon: dist(sbs.map((c) => c.anon)),
  }
  results.processes_per_sandbox = {
    container: dist(sbs.map((c) => c.pids.container)).mean,
    shim: dist(sbs.map((c) => c.pids.shim)).mean,
    proxy: dist(sbs.map((c) => c.pids.proxy)).mean,
  }
  results.threads_per_sandbox = {
    container: dist(sbs.map((c) => c.threads.container)).mean,
    shim: dist(sbs.map((c) => c.threads.shim)).mean,
    proxy: dist(sbs.map((c) => c.threads.proxy)).mean,
  }
  results.sandboxes_measured = sbs.length
  results.pooled = pooled.length
  results.server_after = await serverMem()
  results.pids_after = await pidsInUse()
  results.mem_available_drop_mib = mib(availBefore - (await memAvailableKB()))
  const pp = results.processes_per_sandbox
  const tp = results.threads_per_sandbox
  note(`\nidle, ${sbs.length} sandboxes (+${pooled.length} pooled, not counted), ${opt.settle} s after the last create; load ${results.load.measured}`)
  note(`PSS per sandbox, all          ${fmtMiB(results.pss_kb.total)}`)
  note(`  in the container             ${fmtMiB(results.pss_kb.container)}`)
  note(`    of which anonymous         ${fmtMiB(results.pss_kb.container_anon)}`)
  note(`  containerd shim              ${fmtMiB(results.pss_kb.shim)}`)
  note(`  docker-proxy                 ${fmtMiB(results.pss_kb.proxy)}`)
  note(`processes (threads) per sandbox: container ${pp.container.toFixed(1)} (${tp.container.toFixed(1)}), shim ${pp.shim.toFixed(1)} (${tp.shim.toFixed(1)}), docker-proxy ${pp.proxy.toFixed(1)} (${tp.proxy.toFixed(1)})`)
  note(`PSS of all ${sbs.length}: ${mib(sbs.reduce((a, c) => a + total(c), 0)).toFixed(0)} MiB; host MemAvailable dropped ${results.mem_available_drop_mib.toFixed(0)} MiB (noisy: the machine is shared)`)
  const sa = results.server_after
  note(`server with them: RSS ${mib(sa.rss).toFixed(1)} MiB, PSS ${mib(sa.pss).toFixed(1)} MiB, ${sa.threads} threads`)
  note(`host threads ${results.pids_before.threads} → ${results.pids_after.threads} (kernel.pid_max ${results.pids_after.pid_max})`)

  // Listing.
  const { sdkAll, rawPage, rawAll } = await timeListings({ Sandbox, server, expected: made.length, runs: Number(opt.lists) })
  results.list_all_sdk = stat(sdkAll)
  results.list_page_raw = stat(rawPage)
  results.list_all_raw = stat(rawAll)
  note(`\nSandbox.list() of all ${made.length} (pages of 100)  ${fmt(results.list_all_sdk)}`)
  note(`one GET /v2/sandboxes?limit=100 page      ${fmt(results.list_page_raw)}`)
  note(`all ${made.length} by raw GETs                   ${fmt(results.list_all_raw)}`)
  results.server_after_list = await serverMem()
  note(`server after the listings: RSS ${mib(results.server_after_list.rss).toFixed(1)} MiB; load ${load()}`)
  if (opt.json) console.log(JSON.stringify(results, null, 2))
} catch (e) {
  failed = true
  console.error(e)
  console.error(`--- server log tail:\n${await server.logTail(40)}`)
} finally {
  const t = now()
  await cleanup()
  console.error(`(removed everything in ${((now() - t) / 1000).toFixed(0)} s; killing the ${made.length} sandboxes, ${PAR} at a time, took ${results.kill_all_s?.toFixed(0)} s)`)
}
process.exit(failed ? 1 : 0)
