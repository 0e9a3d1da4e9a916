// fork.mjs: forks and snapshots that keep memory, on the gVisor engine of scripts/setup-gvisor.sh,
// through the official e2b SDK, for a sandbox of --memory-mb (512) MiB holding --used-mb (100) MiB
// in a running process (a Python process that fills a bytearray and serves on :8000):
//   fork        Sandbox.fork({count}) → every fork running, for each --counts (1,3,10), --n times
//               (p50 and the runs); each fork's first command (fork → commands.run('true') in it)
//   snapshot    createSnapshot() of that sandbox, and the disk its memory image takes
//   create      Sandbox.create(snapshotId) → first command, --n times (p50)
//   phases      the mean time of each step of the captures (path capture: freeze, memory_save,
//               commit, thaw) and of the restores (path memory), from the server's GET /metrics
//
//   node bench/fork/fork.mjs [--counts 1,3,10] [--n 3] [--memory-mb 512] [--used-mb 100] [--json]
//
// Needs the gVisor engine (scripts/setup-gvisor.sh start) and root (it reads the engine's data
// root for the memory image's size). Every sandbox it makes is killed at its end.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { parseArgs } from 'node:util'
import { join } from 'node:path'
import { sdk, startServer } from '../server.mjs'

const { values: opt } = parseArgs({
  options: {
    counts: { type: 'string', default: '1,3,10' },
    n: { type: 'string', default: '3' },
    'memory-mb': { type: 'string', default: '512' },
    'used-mb': { type: 'string', default: '100' },
    json: { type: 'boolean', default: false },
  },
})
// DOCKER_HOST may name another gVisor engine of scripts/setup-gvisor.sh (GV_RUN=...), with a
// WARREN_NETWORK of its own (wgv*).
Object.assign(process.env, { DOCKER_HOST: process.env.DOCKER_HOST || 'unix:///run/warren-gvisor/docker.sock', WARREN_RUNTIME: 'gvisor', WARREN_NETWORK: process.env.WARREN_NETWORK || 'wgvbf' })
const run = promisify(execFile)
const { Sandbox } = await sdk('e2b')
const now = () => performance.now()
const note = (m) => !opt.json && console.log(m)
const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]
const ms = (x) => Math.round(x)

const server = await startServer({ name: `warren-forkbench-${process.pid}`, args: [`--memory-mb=${opt['memory-mb']}`] })
const meta = { bench: server.name }
const made = []
const out = { memoryMB: Number(opt['memory-mb']), usedMB: Number(opt['used-mb']), fork: {}, forkFirstCommand: [], snapshot: {}, createFromSnapshot: [], phases: {} }

// phaseMeans returns the mean milliseconds of each step of path's traces, from GET /metrics.
async function phaseMeans(path) {
  const text = await (await server.api('/metrics')).text()
  const sums = {}
  const counts = {}
  for (const m of text.matchAll(/^warren_create_phase_seconds_(sum|count)\{path="([^"]+)",phase="([^"]+)"\} (\S+)$/gm)) {
    if (m[2] !== path) continue
    ;(m[1] === 'sum' ? sums : counts)[m[3]] = Number(m[4])
  }
  return Object.fromEntries(Object.keys(sums).map((k) => [k, Math.round((sums[k] / counts[k]) * 1000)]))
}

const holder = `import http.server
data = bytearray(${Number(opt['used-mb'])} << 20)
for i in range(0, len(data), 4096):
    data[i] = 1
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"%d" % len(data))
http.server.HTTPServer(("0.0.0.0", 8000), H).serve_forever()
`

try {
  const src = await Sandbox.create({ timeoutMs: 1_800_000, metadata: meta })
  made.push(src)
  await src.files.write('/home/user/holder.py', holder)
  await src.commands.run('python3 /home/user/holder.py', { background: true, timeoutMs: 0 })
  for (;;) {
    const r = await src.commands.run('curl -s 127.0.0.1:8000 || true')
    if (r.stdout.trim() === String(Number(opt['used-mb']) << 20)) break
  }
  note(`source ${src.sandboxId}: ${opt['used-mb']} MiB held in a process, ${opt['memory-mb']} MiB sandbox`)

  for (const count of opt.counts.split(',').map(Number)) {
    const runs = []
    for (let i = 0; i < Number(opt.n); i++) {
      const t0 = now()
      const forks = await src.fork({ count, timeoutMs: 600_000 })
      const took = now() - t0
      const bad = forks.filter((f) => f instanceof Error)
      if (bad.length) throw new Error(`fork of ${count}: ${bad.length} failed: ${bad[0].message}`)
      made.push(...forks)
      const t1 = now()
      await forks[0].commands.run('true')
      out.forkFirstCommand.push(took + now() - t1)
      runs.push(took)
      await Promise.all(forks.map((f) => f.kill()))
    }
    out.fork[count] = { p50: ms(p50(runs)), runs: runs.map(ms) }
    note(`fork count ${count}: p50 ${ms(p50(runs))} ms (${runs.map(ms).join(', ')})`)
  }
  note(`fork → first command in a fork (count 1..): p50 ${ms(p50(out.forkFirstCommand))} ms`)

  const t0 = now()
  const snap = await src.createSnapshot()
  out.snapshot.ms = ms(now() - t0)
  const root = (await run('docker', ['info', '-f', '{{.DockerRootDir}}'])).stdout.trim()
  const dir = join(root, 'warren-memory', server.name, snap.snapshotId)
  out.snapshot.memoryImageBytes = Number((await run('du', ['-sb', dir])).stdout.split('\t')[0])
  out.snapshot.memoryImageDiskBytes = Number((await run('du', ['-sB1', dir])).stdout.split('\t')[0])
  note(`snapshot: ${out.snapshot.ms} ms; memory image ${(out.snapshot.memoryImageBytes / 2 ** 20).toFixed(1)} MiB ` +
    `(${(out.snapshot.memoryImageDiskBytes / 2 ** 20).toFixed(1)} MiB on disk)`)
  for (let i = 0; i < Number(opt.n); i++) {
    const t1 = now()
    const s = await Sandbox.create(snap.snapshotId, { timeoutMs: 600_000, metadata: meta })
    await s.commands.run('true')
    out.createFromSnapshot.push(ms(now() - t1))
    made.push(s)
    await s.kill()
  }
  note(`create from the memory snapshot → first command: p50 ${p50(out.createFromSnapshot)} ms (${out.createFromSnapshot.join(', ')})`)
  await Sandbox.deleteSnapshot(snap.snapshotId)
  out.forkFirstCommand = { p50: ms(p50(out.forkFirstCommand)), runs: out.forkFirstCommand.map(ms) }
  out.createFromSnapshot = { p50: p50(out.createFromSnapshot), runs: out.createFromSnapshot }
  for (const path of ['capture', 'memory']) {
    out.phases[path] = await phaseMeans(path)
    note(`phases of ${path} (mean ms): ${Object.entries(out.phases[path]).map(([k, v]) => `${k}=${v}`).join(' ')}`)
  }
  if (opt.json) console.log(JSON.stringify(out, null, 2))
} finally {
  await Promise.all(made.map((s) => s.kill().catch(() => {})))
  await server.dispose()
}
