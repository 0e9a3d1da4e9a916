// Forks and snapshots that keep memory (docs: README "Fork and snapshots"). Under gVisor
// (test.sh's gvisor_suite, WARREN_RUNTIME=gvisor) a Python process holding state in memory and
// serving on :8000 goes on in every fork, reached through each fork's own port URL; forks are
// independent of each other and of the source, which keeps running under its ID; a snapshot
// keeps the process for sandboxes created from it, and one taken with memory: false cold-boots;
// a code interpreter's variables are in every fork. Under runc an explicit request for memory is
// refused naming gVisor, and a fork says in its log that it carried the filesystem only. A
// kill -9 of the server in the middle of a fork leaks nothing and loses nothing. Fork exists
// from SDK 2.4x: 2.51 only. The file has a server of its own, which it kills.
import { it } from 'node:test'
import { existsSync, readdirSync } from 'node:fs'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { join } from 'node:path'
import { Sandbox as CodeInterpreter } from '@e2b/code-interpreter'
import { useServer } from './harness.mjs'
import { assert, describeEachSdk, listAll, proxyFetch, uid, waitFor } from './helpers.mjs'

const server = await useServer({ private: true })
const docker = async (...args) => (await promisify(execFile)('docker', args)).stdout.trim()
const gvisor = process.env.WARREN_RUNTIME === 'gvisor'
const onlyGVisor = !gvisor && 'memory is kept under gVisor only (test.sh gvisor_suite runs this)'
const onlyRunc = gvisor && 'the refusal is for runtimes that cannot keep memory'

// A server whose state lives only in its memory: a random token drawn at start and a counter
// of the requests it answered; it answers "<token> <count> <hostname>".
const stateful = `import http.server, os, socket
token = os.urandom(8).hex()
count = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global count
        count += 1
        body = ("%s %d %s" % (token, count, socket.gethostname())).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
`

async function ask(sandboxId) {
  const res = await proxyFetch(sandboxId, 8000, '/')
  assert.equal(res.status, 200, `port 8000 of ${sandboxId}`)
  const [token, count, host] = (await res.text()).split(' ')
  return { token, count: Number(count), host }
}

async function startStateful(sbx) {
  await sbx.files.write('/home/user/stateful.py', stateful)
  await sbx.commands.run('python3 /home/user/stateful.py', { background: true, timeoutMs: 0 })
  return waitFor(() => ask(sbx.sandboxId).catch(() => null), { timeoutMs: 20_000, what: 'the stateful server' })
}

function api(path, init = {}) {
  return fetch(`${server.url}${path}`, {
    ...init,
    headers: { 'X-API-Key': server.apiKey, 'Content-Type': 'application/json', ...init.headers },
    signal: AbortSignal.timeout(120_000),
  })
}

async function logs(sandboxId) {
  const res = await api(`/v2/sandboxes/${sandboxId}/logs`)
  assert.equal(res.status, 200)
  return (await res.json()).logs.map((l) => l.message)
}

describeEachSdk('fork and snapshots with memory', (ctx) => {
  it('a process serving on :8000 goes on in 2 forks; forks are independent; the source runs on', { skip: ctx.is219 || onlyGVisor, timeout: 180_000 }, async () => {
    const src = await ctx.create({ timeoutMs: 300_000 })
    await src.files.write('/home/user/f.txt', 'before the fork')
    const before = await startStateful(src)
    const forks = await src.fork({ count: 2, timeoutMs: 120_000 })
    assert.equal(forks.length, 2)
    for (const f of forks) assert.ok(!(f instanceof Error), `a fork failed: ${f?.message}`)
    const [a, b] = forks.map((f) => ctx.track(f))
    assert.equal(new Set([src.sandboxId, a.sandboxId, b.sandboxId]).size, 3)

    for (const f of [a, b]) {
      const got = await ask(f.sandboxId)
      assert.equal(got.token, before.token, 'the fork runs the source\'s process, its memory as it was')
      assert.equal(got.count, before.count + 1, 'the counter goes on from the fork\'s instant')
      assert.equal(got.host, f.sandboxId, 'each fork has its own hostname')
      assert.equal(await f.files.read('/home/user/f.txt'), 'before the fork')
      assert.equal((await f.commands.run('whoami')).stdout, 'user\n', 'each fork\'s own token opens its agent')
      assert.match((await logs(f.sandboxId)).join('\n'), /forked with its source's memory/)
    }
    // Independence: requests and writes in one are seen nowhere else.
    await ask(a.sandboxId)
    await ask(a.sandboxId)
    await a.files.write('/home/user/f.txt', 'changed in a')
    assert.equal((await ask(b.sandboxId)).count, before.count + 2)
    assert.equal((await ask(a.sandboxId)).count, before.count + 4)
    assert.equal(await b.files.read('/home/user/f.txt'), 'before the fork')

    // The source runs on under its ID, its process untouched by its forks.
    assert.equal(await src.isRunning(), true)
    const after = await ask(src.sandboxId)
    assert.deepEqual([after.token, after.count, after.host], [before.token, before.count + 1, src.sandboxId])
    assert.equal(await src.files.read('/home/user/f.txt'), 'before the fork')
    await a.kill()
    assert.equal((await ask(b.sandboxId)).count, before.count + 3, 'a fork outlives its sibling')
  })

  it('a snapshot keeps the process for sandboxes created from it; memory: false cold-boots', { skip: ctx.is219 || onlyGVisor, timeout: 180_000 }, async () => {
    const src = await ctx.create({ timeoutMs: 300_000 })
    await src.files.write('/home/user/snap.txt', 'in the snapshot')
    const before = await startStateful(src)
    const snap = await src.createSnapshot()
    const res = await api(`/sandboxes/${src.sandboxId}/snapshots`, { method: 'POST', body: JSON.stringify({ memory: false }) })
    assert.equal(res.status, 201, await res.clone().text())
    const diskOnly = (await res.json()).snapshotID
    try {
      const warm = await ctx.create(snap.snapshotId, { timeoutMs: 120_000 })
      const got = await ask(warm.sandboxId)
      assert.deepEqual([got.token, got.count, got.host], [before.token, before.count + 1, warm.sandboxId])
      assert.equal(await warm.files.read('/home/user/snap.txt'), 'in the snapshot')

      const cold = await ctx.create(diskOnly, { timeoutMs: 120_000 })
      assert.equal(await cold.files.read('/home/user/snap.txt'), 'in the snapshot')
      const port = await proxyFetch(cold.sandboxId, 8000, '/')
      assert.equal(port.status, 502, 'a filesystem-only snapshot starts without the process')
      assert.equal((await ask(src.sandboxId)).count, before.count + 1, 'the source runs on')
    } finally {
      await ctx.sdk.Sandbox.deleteSnapshot(snap.snapshotId)
      await ctx.sdk.Sandbox.deleteSnapshot(diskOnly)
    }
  })

  it('a code interpreter\'s variables are in each of 3 forks', { skip: ctx.is219 || onlyGVisor, timeout: 240_000 }, async () => {
    const src = ctx.track(await CodeInterpreter.create({ timeoutMs: 300_000, metadata: { e2e: ctx.tag } }))
    const set = await src.runCode('x = 41 + 1')
    assert.equal(set.error, undefined)
    const forks = await src.fork({ count: 3, timeoutMs: 120_000 })
    for (const f of forks) assert.ok(!(f instanceof Error), `a fork failed: ${f?.message}`)
    for (const f of forks) ctx.track(f)
    const got = await Promise.all(forks.map(async (f) => (await f.runCode('x')).text))
    assert.deepEqual(got, ['42', '42', '42'])
    await forks[0].runCode('x = 0')
    assert.equal((await forks[1].runCode('x')).text, '42', 'forks\' kernels are independent')
    assert.equal((await src.runCode('x')).text, '42')
  })

  it('kill -9 of the server in the middle of a fork leaks nothing; the source goes on after the restart', { skip: ctx.is219 || onlyGVisor, timeout: 180_000 }, async () => {
    const lineage = uid() // forks copy their source's metadata
    const src = await ctx.create({ timeoutMs: 300_000, metadata: { lineage } })
    const before = await startStateful(src)
    const name = server.server.name
    const images = join(await docker('info', '-f', '{{.DockerRootDir}}'), 'warren-memory', name)
    // This fork's image: one of the server's fork images that earlier tests' forks do not use.
    const forkImages = async () => (await docker('images', '-q', '--filter', `label=dev.warren.fork=${name}`, 'warren/fork')).split('\n').filter(Boolean)
    const earlier = new Set(await forkImages())
    const ours = async () => (await forkImages()).filter((id) => !earlier.has(id))
    const forking = api(`/sandboxes/${src.sandboxId}/fork`, { method: 'POST', body: JSON.stringify({ count: 3, timeout: 60 }) }).catch((e) => e)
    // Killed once the memory image is written: its forks are being restored.
    await waitFor(() => existsSync(images) && readdirSync(images).length > 0, { timeoutMs: 30_000, intervalMs: 20, what: 'the fork\'s memory image' })
    await server.server.kill9()
    await forking
    await server.server.start()

    await waitFor(() => !existsSync(images) || readdirSync(images).length === 0, { timeoutMs: 20_000, what: 'the memory image deleted' })
    const live = (await listAll(ctx.sdk.Sandbox.list())).map((s) => s.sandboxId)
    const lineageLive = (await listAll(ctx.sdk.Sandbox.list({ query: { metadata: { lineage } } }))).map((s) => s.sandboxId)
    const containers = (await docker('ps', '-a', '--filter', `label=dev.warren.managed=${name}`,
      '--format', '{{.Label "dev.warren.sandbox"}} {{.Label "dev.warren.pool"}}')).split('\n').filter(Boolean)
    for (const [id, pool] of containers.map((c) => c.split(' '))) {
      assert.ok(pool === 'true' || live.includes(id), `container of ${id}, which no listed sandbox owns`)
    }
    // Forks that were up before the kill are whole; once they are gone, so is their image.
    for (const id of lineageLive.filter((id) => id !== src.sandboxId)) {
      const f = ctx.track(await ctx.sdk.Sandbox.connect(id))
      assert.equal((await ask(id)).token, before.token)
      await f.kill()
    }
    await waitFor(async () => (await ours()).length === 0, { timeoutMs: 20_000, what: 'the fork image deleted' })
    // The source was frozen at most for the capture: it runs, or is paused with its memory.
    const back = await ctx.sdk.Sandbox.connect(src.sandboxId)
    assert.equal((await ask(back.sandboxId)).token, before.token)
  })

  it('under runc: memory is refused by name, and a fork says it carried the filesystem only', { skip: ctx.is219 || onlyRunc, timeout: 120_000 }, async () => {
    const src = await ctx.create({ timeoutMs: 120_000 })
    await src.files.write('/home/user/f.txt', `fs ${uid()}`)
    const res = await api(`/sandboxes/${src.sandboxId}/snapshots`, { method: 'POST', body: JSON.stringify({ memory: true }) })
    assert.equal(res.status, 400)
    assert.match((await res.json()).message, /memory.*gVisor/)
    const [f] = await src.fork({ count: 1, timeoutMs: 60_000 })
    assert.ok(!(f instanceof Error), `the fork failed: ${f?.message}`)
    ctx.track(f)
    assert.equal(await f.files.read('/home/user/f.txt'), await src.files.read('/home/user/f.txt'))
    assert.match((await logs(f.sandboxId)).join('\n'), /filesystem only: .*gVisor/)
  })
})
