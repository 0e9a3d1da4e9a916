// sdk-bench.mjs: benchmark warren-agent through the official e2b SDK, the way users reach it.
//
//   node bench/agent/sdk-bench.mjs --url http://localhost:49985 --container NAME [--runs 300]
//
// bench/run.sh starts the sandbox and passes these. It prints:
//   - commands.run('true') round trip, p50/p95/p99 over --runs runs (after a warm-up);
//   - files.write (of bytes, and of a stream) then files.read of 1 MB and 100 MB, in MB/s
//     (MB = 10^6 bytes), through the SDK and, for comparison, with plain fetch (octet-stream
//     upload, identity download) and with curl (what the agent sustains for a client that is
//     not Node), with how busy the client's and the agent's CPUs were;
//   - the agent's resident memory (VmRSS of the agent process, and of its PID-1 init), idle and
//     with 10 running commands, read from /proc inside the container with docker exec.
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync, unlinkSync } from 'node:fs'
import { join } from 'node:path'
import { createRequire } from 'node:module'
import { parseArgs } from 'node:util'
import os from 'node:os'
import { randomBytes } from 'node:crypto'

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://localhost:49985' },
    container: { type: 'string' },
    runs: { type: 'string', default: '300' },
    json: { type: 'boolean', default: false },
  },
})
const RUNS = Number(opt.runs)

// The SDK is installed once, for the end-to-end tests.
const require = createRequire(new URL('../../test/e2e/package.json', import.meta.url))
const { Sandbox } = await import(require.resolve('e2b'))

const sbx = await Sandbox.create({ debug: true, sandboxUrl: opt.url, requestTimeoutMs: 600_000 })
const step = (m) => process.stderr.write(`bench: ${m}\n`)
const results = {}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}

// The host PIDs of the container's PID 1 (the agent's init) and of its child, the agent proper,
// to read their CPU time and memory from the host's /proc.
const initPid = opt.container &&
  execFileSync('docker', ['inspect', '-f', '{{.State.Pid}}', opt.container], { encoding: 'utf8' }).trim()
const agentPid = initPid && execFileSync('pgrep', ['-P', initPid], { encoding: 'utf8' }).trim().split('\n')[0]

// Fresh agent, before any load.
if (opt.container) results.rssFresh = agentRss()

// ------------------------------------------------------------------ run('true')
{
  for (let i = 0; i < 30; i++) await sbx.commands.run('true')
  const ms = []
  for (let i = 0; i < RUNS; i++) {
    const t = process.hrtime.bigint()
    await sbx.commands.run('true')
    ms.push(Number(process.hrtime.bigint() - t) / 1e6)
  }
  ms.sort((a, b) => a - b)
  results.runTrue = { runs: RUNS, p50: pct(ms, 50), p95: pct(ms, 95), p99: pct(ms, 99), min: ms[0] }
  // For reference: the cost of the shell itself inside the sandbox (bash -l -c true).
  const r = await sbx.commands.run(
    'python3 -c "import subprocess,time; t=time.perf_counter(); [subprocess.run([\'/bin/bash\',\'-l\',\'-c\',\'true\']) for _ in range(50)]; print((time.perf_counter()-t)/50*1000)"',
  )
  results.runTrue.bashLoginMs = Number(r.stdout.trim())
}

// ------------------------------------------------------------------ files
/** CPU milliseconds used so far by this process and by the agent. */
function cpuMs() {
  const u = process.cpuUsage()
  let agent = NaN
  if (agentPid) {
    const f = readFileSync(`/proc/${agentPid}/stat`, 'utf8').split(') ')[1].split(' ')
    agent = ((Number(f[11]) + Number(f[12])) * 1000) / 100 // utime + stime, in clock ticks of 10 ms
  }
  return { client: (u.user + u.system) / 1000, agent }
}

/**
 * Runs f, returning its wall time and the CPU the client (this process) and the agent spent on
 * it, as fractions of that wall time: which side a transfer waits on.
 */
async function timed(f) {
  const c0 = cpuMs()
  const t = performance.now()
  await f()
  const wall = performance.now() - t
  const c1 = cpuMs()
  return { wall, client: (c1.client - c0.client) / wall, agent: (c1.agent - c0.agent) / wall }
}

async function fileBench(sizeMB) {
  const size = sizeMB * 1_000_000
  // Random bytes: incompressible, like most large binaries. (See bench/README.md for what
  // happens with compressible data, which undici's fetch decodes very slowly from a gzip stream.)
  const data = randomBytes(size)
  const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.length)
  const path = `/tmp/bench-${sizeMB}mb.bin`
  const rounds = sizeMB >= 100 ? 3 : 10
  const best = { sdkWrite: Infinity, sdkStreamWrite: Infinity, sdkRead: Infinity, fetchWrite: Infinity, fetchRead: Infinity,
    curlWrite: Infinity, curlRead: Infinity }
  // curl, a client that is not Node, shows what the agent itself sustains.
  const local = join(os.tmpdir(), `warren-bench-${process.pid}-${sizeMB}mb.bin`)
  writeFileSync(local, data)
  const cpu = {}
  const keep = (name, m) => {
    step(`  ${name} ${m.wall.toFixed(0)} ms (CPU: client ${(m.client * 100).toFixed(0)}%, agent ${(m.agent * 100).toFixed(0)}%)`)
    if (m.wall < best[name]) [best[name], cpu[name]] = [m.wall, { client: m.client, agent: m.agent }]
  }
  for (let r = 0; r < rounds; r++) {
    step(`${sizeMB} MB round ${r + 1}/${rounds}`)
    keep('sdkWrite', await timed(() => sbx.files.write(path, ab)))
    // A stream goes as one octet-stream body instead of a multipart form.
    keep('sdkStreamWrite', await timed(() => sbx.files.write(path, new Blob([data]).stream())))
    let back
    keep('sdkRead', await timed(async () => (back = await sbx.files.read(path, { format: 'bytes' }))))
    if (back.length !== size) throw new Error(`read ${back.length} bytes, want ${size}`)

    let t
    const url = `${opt.url}/files?path=${encodeURIComponent(path)}`
    t = performance.now()
    const up = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: data })
    if (up.status !== 200) throw new Error(`upload: ${up.status} ${await up.text()}`)
    await up.arrayBuffer()
    best.fetchWrite = Math.min(best.fetchWrite, performance.now() - t)
    step(`  fetch write ${(performance.now() - t).toFixed(0)} ms`)
    t = performance.now()
    const down = await fetch(url, { headers: { 'Accept-Encoding': 'identity' } })
    const got = await down.arrayBuffer()
    best.fetchRead = Math.min(best.fetchRead, performance.now() - t)
    step(`  fetch read ${(performance.now() - t).toFixed(0)} ms`)
    if (got.byteLength !== size) throw new Error(`fetch read ${got.byteLength} bytes`)

    const curl = (...args) => Number(execFileSync('curl', ['-sS', '-f', '-o', '/dev/null', '-w', '%{time_total}', ...args, url], { encoding: 'utf8' })) * 1000
    best.curlWrite = Math.min(best.curlWrite, curl('-H', 'Content-Type: application/octet-stream', '--data-binary', `@${local}`))
    best.curlRead = Math.min(best.curlRead, curl('-H', 'Accept-Encoding: identity'))
  }
  unlinkSync(local)
  await sbx.files.remove(path)
  const mbps = (ms) => size / 1e6 / (ms / 1000)
  return {
    rounds,
    sdkWriteMBps: mbps(best.sdkWrite),
    sdkStreamWriteMBps: mbps(best.sdkStreamWrite),
    sdkReadMBps: mbps(best.sdkRead),
    cpu,
    sdkRoundTripMBps: (2 * size) / 1e6 / ((best.sdkWrite + best.sdkRead) / 1000),
    fetchWriteMBps: mbps(best.fetchWrite),
    fetchReadMBps: mbps(best.fetchRead),
    curlWriteMBps: mbps(best.curlWrite),
    curlReadMBps: mbps(best.curlRead),
  }
}
results.files1MB = await fileBench(1)
results.files100MB = await fileBench(100)

// ------------------------------------------------------------------ RSS
function agentRss() {
  if (!opt.container) return undefined
  // RSS counts the pages of the binary that the init and the agent both map in each of them;
  // PSS shares them out, so the two PSS add up to what the pair really holds.
  const mem = (pid) => ({
    rss: Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]),
    pss: Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))[1]),
  })
  const init = mem(initPid)
  const agent = mem(agentPid)
  return { agentKB: agent.rss, initKB: init.rss, agentPssKB: agent.pss, initPssKB: init.pss }
}
if (opt.container) {
  await new Promise((r) => setTimeout(r, 2000))
  global.gc?.()
  results.rssIdle = agentRss()
  const handles = []
  for (let i = 0; i < 10; i++) {
    handles.push(await sbx.commands.run(`sleep 600 # bench ${i}`, { background: true, timeoutMs: 0 }))
  }
  await new Promise((r) => setTimeout(r, 1000))
  results.rss10 = agentRss()
  for (const h of handles) await h.kill()
}

// ------------------------------------------------------------------ report
const cpu = os.cpus()[0]?.model ?? 'unknown cpu'
results.machine = {
  date: new Date().toISOString(),
  cpu: `${cpu} × ${os.cpus().length}`,
  memGB: +(os.totalmem() / 2 ** 30).toFixed(1),
  kernel: os.release(),
  node: process.version,
  url: opt.url,
}
if (opt.json) {
  console.log(JSON.stringify(results, null, 2))
} else {
  const f = (n, d = 1) => n.toFixed(d)
  const r = results.runTrue
  console.log(`machine: ${results.machine.cpu}, ${results.machine.memGB} GiB, Linux ${results.machine.kernel}, node ${results.machine.node}`)
  console.log(`date:    ${results.machine.date}`)
  console.log(`commands.run('true') over ${r.runs} runs: p50 ${f(r.p50, 2)} ms, p95 ${f(r.p95, 2)} ms, p99 ${f(r.p99, 2)} ms (min ${f(r.min, 2)} ms; bash -l -c true alone inside: ${f(r.bashLoginMs, 2)} ms)`)
  for (const [label, x] of [['1 MB', results.files1MB], ['100 MB', results.files100MB]]) {
    console.log(`files ${label} (best of ${x.rounds}): SDK write ${f(x.sdkWriteMBps)} MB/s (of a stream ${f(x.sdkStreamWriteMBps)} MB/s), SDK read ${f(x.sdkReadMBps)} MB/s, write+read ${f(x.sdkRoundTripMBps)} MB/s; plain fetch write ${f(x.fetchWriteMBps)} MB/s, read ${f(x.fetchReadMBps)} MB/s; curl write ${f(x.curlWriteMBps)} MB/s, read ${f(x.curlReadMBps)} MB/s`)
    const share = (c) => `client ${f(c.client * 100, 0)}%, agent ${f(c.agent * 100, 0)}%`
    if (x === results.files100MB && agentPid) {
      console.log(`  CPU busy during the best SDK write: ${share(x.cpu.sdkWrite)}; stream write: ${share(x.cpu.sdkStreamWrite)}; read: ${share(x.cpu.sdkRead)}`)
    }
  }
  if (results.rssIdle) {
    const mem = (r) => `RSS ${f(r.agentKB / 1024)} MiB (+ init ${f(r.initKB / 1024)} MiB); ` +
      `PSS agent + init ${f(r.agentPssKB / 1024)} + ${f(r.initPssKB / 1024)} = ${f((r.agentPssKB + r.initPssKB) / 1024)} MiB`
    console.log(`agent fresh (before any request): ${mem(results.rssFresh)}`)
    console.log(`agent idle after the runs above: ${mem(results.rssIdle)}`)
    console.log(`agent with 10 running commands: ${mem(results.rss10)}`)
  }
}
