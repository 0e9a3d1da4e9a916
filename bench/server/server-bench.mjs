// server-bench.mjs: benchmark `warren serve` through the official e2b SDK (2.51), the way users
// reach it (E2B_API_URL/E2B_SANDBOX_URL pointing at the server).
//
//   node bench/server/server-bench.mjs [--n 20] [--parallel 20] [--pauses 10] [--list 100]
//                                      [--runs 300] [--only create,pause,list,proxy] [--json]
//                                      [--serve-arg=--warm-pool=0 ...]
//
// It starts its own server (test/e2e/server/harness.mjs: free 127.0.0.1 port, fresh state dir,
// its own container label) and removes every sandbox and container it made at the end. Prints:
//   create   Sandbox.create() → first commands.run('true') resolved, one at a time (--n) and
//            --parallel at once; p50/p95, with create() alone beside it, and a baseline:
//            `docker run -d` of the same image with a published port (the engine's own cost);
//   pause    sbx.pause() and the resume (Sandbox.connect of the paused sandbox), frozen
//            (keepMemory true, the default) and stopped (keepMemory false); plus the raw
//            POST /pause and POST /v2/.../connect without the SDK;
//   list     with --list sandboxes alive: Sandbox.list() of all of them (pages of 100) through
//            the SDK, one raw GET /v2/sandboxes?limit=100 page, and all pages by raw GETs;
//   proxy    commands.run('true') and GET /health through the proxy vs the agent's published
//            port directly (interleaved runs), p50/p95 and the p50 difference.
import { execFileSync } from 'node:child_process'
import { parseArgs } from 'node:util'
import os from 'node:os'
import { removeSandboxContainers, sdk, startServer } from '../server.mjs'
import { reporter } from '../stats.mjs'
import { timeListings } from '../listing.mjs'

const { values: opt } = parseArgs({
  options: {
    n: { type: 'string', default: '20' },
    parallel: { type: 'string', default: '20' },
    pauses: { type: 'string', default: '10' },
    list: { type: 'string', default: '100' },
    runs: { type: 'string', default: '300' },
    only: { type: 'string', default: 'create,pause,list,proxy' },
    json: { type: 'boolean', default: false },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})
const only = new Set(opt.only.split(','))
// On the Kubernetes engine (WARREN_ENGINE=kubernetes, as test/e2e/kube-run.sh sets it) there
// is no docker run to compare with, and no pause without memory (docs/kubernetes.md).
const kube = process.env.WARREN_ENGINE === 'kubernetes'

const { Sandbox } = await sdk('e2b')

const now = () => performance.now()
const results = {}
const report = reporter(results, 52, opt.json)
const note = (m) => !opt.json && console.log(m)

const server = await startServer({ name: `warren-bench-${process.pid}`, args: opt['serve-arg'] })
const meta = { bench: server.name }

async function createAndRun() {
  const t0 = now()
  const sbx = await Sandbox.create({ metadata: meta })
  const t1 = now()
  await sbx.commands.run('true')
  return { sbx, create: t1 - t0, total: now() - t0 }
}

let failed = false
try {
  note(`warren serve ${opt['serve-arg'].join(' ')} bench — ${new Date().toISOString()} — ${os.cpus().length} × ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`)

  // warm-up: the first create pays for image and page-cache warm-up
  await (await createAndRun()).sbx.kill()

  if (only.has('create')) {
    const totals = []
    const creates = []
    for (let i = 0; i < Number(opt.n); i++) {
      const r = await createAndRun()
      totals.push(r.total)
      creates.push(r.create)
      await r.sbx.kill()
    }
    report('create_first_cmd_seq', `create → first run('true'), one at a time`, totals)
    report('create_only_seq', `  of which Sandbox.create()`, creates)

    const P = Number(opt.parallel)
    const t0 = now()
    const rs = await Promise.all(Array.from({ length: P }, () => createAndRun()))
    const wall = now() - t0
    report('create_first_cmd_parallel', `create → first run('true'), ${P} at once`, rs.map((r) => r.total))
    report('create_only_parallel', `  of which Sandbox.create()`, rs.map((r) => r.create))
    results.create_parallel_wall_ms = wall
    note(`${'  wall time for all of them'.padEnd(52)} ${wall.toFixed(0)} ms`)
    await Promise.all(rs.map((r) => r.sbx.kill()))
  }

  if (only.has('create') && !kube) {
    // Baseline: what the engine alone takes to create and start a comparable container
    // (docker CLI, published port, same image), so the server's share is visible.
    const base = []
    for (let i = 0; i < Math.min(10, Number(opt.n)); i++) {
      const t0 = now()
      const id = execFileSync('docker', ['run', '-d', '--label', `bench=${server.name}`, '-p', '127.0.0.1::49983',
        '--entrypoint', '/bin/sleep', 'warren/base', '600']).toString().trim()
      base.push(now() - t0)
      execFileSync('docker', ['rm', '-f', id])
    }
    report('docker_run_baseline', 'baseline: docker run -d (CLI), same image', base)
  }

  if (only.has('pause')) {
    const sbx = await Sandbox.create({ metadata: meta })
    for (const [mode, keepMemory] of [['frozen', true], ['stopped', false]].slice(0, kube ? 1 : 2)) {
      const pauses = []
      const resumes = []
      const firstCmd = []
      for (let i = 0; i < Number(opt.pauses); i++) {
        let t0 = now()
        await sbx.pause({ keepMemory })
        pauses.push(now() - t0)
        t0 = now()
        const s = await Sandbox.connect(sbx.sandboxId)
        resumes.push(now() - t0)
        await s.commands.run('true')
        firstCmd.push(now() - t0)
      }
      report(`pause_${mode}`, `pause (${mode}) via SDK`, pauses)
      report(`resume_${mode}`, `resume (${mode}) via Sandbox.connect`, resumes)
      report(`resume_${mode}_first_cmd`, `  resume (${mode}) → first run('true')`, firstCmd)
    }
    // raw API, no SDK: POST /pause, POST /v2/sandboxes/{id}/connect
    const rp = []
    const rr = []
    const errors = []
    for (let i = 0; i < Number(opt.pauses); i++) {
      let t0 = now()
      let r = await server.api(`/sandboxes/${sbx.sandboxId}/pause`, { method: 'POST', body: '{}' })
      if (r.status !== 204) errors.push(`pause: ${r.status} ${await r.text()}`)
      else rp.push(now() - t0)
      await r.arrayBuffer().catch(() => {})
      t0 = now()
      r = await server.api(`/v2/sandboxes/${sbx.sandboxId}/connect`, { method: 'POST', body: '{}' })
      if (r.status !== 201) errors.push(`connect: ${r.status} ${await r.text()}`)
      else rr.push(now() - t0)
      await r.arrayBuffer().catch(() => {})
    }
    if (rp.length) report('pause_frozen_raw', 'pause (frozen), raw POST /pause', rp)
    if (rr.length) report('resume_frozen_raw', 'resume (frozen), raw POST /v2/.../connect', rr)
    if (errors.length) {
      results.pause_errors = errors
      console.error(`pause/resume errors: ${errors.join('; ')}\n--- server log tail:\n${await server.logTail(30)}`)
    }
    await sbx.kill()
  }

  if (only.has('list')) {
    const N = Number(opt.list)
    const t0 = now()
    const made = []
    const queue = Array.from({ length: N }, (_, i) => i)
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (queue.length) {
        queue.pop()
        made.push((await Sandbox.create({ metadata: meta, timeoutMs: 3_600_000 })).sandboxId)
      }
    }))
    note(`(created ${N} sandboxes for listing in ${((now() - t0) / 1000).toFixed(1)} s, 8 at a time)`)
    const { sdkAll, rawPage, rawAll } = await timeListings({ Sandbox, server, expected: N, runs: 30 })
    report('list_all_sdk', `Sandbox.list() of all ${N} (pages of 100), SDK`, sdkAll)
    report('list_page_raw', `one GET /v2/sandboxes?limit=100 page, raw`, rawPage)
    report('list_all_raw', `all ${N} by raw GETs (X-Next-Token paging)`, rawAll)
    results.list_n = N
    const q = [...made]
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (q.length) await Sandbox.kill(q.pop())
    }))
  }

  if (only.has('proxy')) {
    const sbx = await Sandbox.create({ metadata: meta })
    const name = execFileSync('docker', ['ps', '-q', '--filter', `label=dev.warren.sandbox=${sbx.sandboxId}`]).toString().trim()
    const port = execFileSync('docker', ['port', name, '49983/tcp']).toString().trim().split('\n')[0].split(':').pop()
    const direct = `http://127.0.0.1:${port}`
    const viaDirect = await Sandbox.connect(sbx.sandboxId, { sandboxUrl: direct })
    const R = Number(opt.runs)
    for (let i = 0; i < 20; i++) {
      await sbx.commands.run('true')
      await viaDirect.commands.run('true')
    }
    const p = []
    const d = []
    for (let i = 0; i < R; i++) {
      let t = now()
      await sbx.commands.run('true')
      p.push(now() - t)
      t = now()
      await viaDirect.commands.run('true')
      d.push(now() - t)
    }
    report('run_true_proxy', `commands.run('true') through the proxy`, p)
    report('run_true_direct', `commands.run('true') straight to the agent`, d)
    results.proxy_overhead_run_p50 = results.run_true_proxy.p50 - results.run_true_direct.p50
    const hp = []
    const hd = []
    const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' }
    for (let i = 0; i < R; i++) {
      let t = now()
      await (await fetch(`${server.url}/health`, { headers })).arrayBuffer()
      hp.push(now() - t)
      t = now()
      await (await fetch(`${direct}/health`)).arrayBuffer()
      hd.push(now() - t)
    }
    report('health_proxy', 'GET /health through the proxy (fetch)', hp)
    report('health_direct', 'GET /health straight to the agent (fetch)', hd)
    results.proxy_overhead_health_p50 = results.health_proxy.p50 - results.health_direct.p50
    note(`${'proxy overhead, p50 difference'.padEnd(52)} run('true') ${results.proxy_overhead_run_p50.toFixed(2)} ms, /health ${results.proxy_overhead_health_p50.toFixed(2)} ms`)
    await sbx.kill()
  }
} catch (e) {
  failed = true
  console.error(`bench failed: ${e.stack}\n--- server log tail:\n${await server.logTail(30)}`)
  process.exitCode = 1
} finally {
  await removeSandboxContainers(server)
  const problems = await server.dispose()
  if (problems.length) console.error(`bench: ${problems.join('; ')}`)
}
if (opt.json) console.log(JSON.stringify(results, null, 2))
