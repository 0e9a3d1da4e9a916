// Pause and resume against a real `warren serve`: pause (state, isRunning, pause twice,
// setTimeout on a paused sandbox), resume through connect (files, a background process and an
// HTTP server survive), paused time not counted against the timeout, auto-pause on timeout,
// auto-resume on proxy traffic, and list with state filters and paging.
import { it } from 'node:test'
import { useServer } from './harness.mjs'
import {
  assert, describeEachSdk, rejectsWith, waitFor, sleep, listTagged, listAll, proxyFetch, startHttpServer, uid,
} from './helpers.mjs'

await useServer()

const alive = async (sbx, pid) => (await sbx.commands.run(`kill -0 ${pid}`).catch((e) => e)).exitCode === 0

describeEachSdk('pause and resume', (ctx) => {
  it('pause: paused state, isRunning false, 502 on its ports; connect resumes files, processes and servers', async () => {
    const sbx = await ctx.create({ timeoutMs: 300_000 })
    const marker = `kept ${uid()}`
    await sbx.files.write('/home/user/keep.txt', marker)
    const sleeper = await sbx.commands.run('sleep 3600', { background: true, timeoutMs: 0 })
    await startHttpServer(sbx, 8000, '/home/user/www', { 'index.txt': 'served before pause' })
    assert.equal((await proxyFetch(sbx.sandboxId, 8000, '/index.txt')).status, 200)

    assert.equal(await sbx.pause(), true)
    assert.equal(await sbx.isRunning(), false)
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['paused']), [sbx.sandboxId])
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['running']), [])
    assert.equal(await sbx.pause(), false, 'pausing a paused sandbox is false (409)')
    await rejectsWith(sbx.setTimeout(60_000), ctx.sdk.SandboxError) // 404 on a paused sandbox
    const res = await proxyFetch(sbx.sandboxId, 8000, '/index.txt')
    assert.equal(res.status, 502, 'a paused sandbox without autoResume answers 502')
    const body = await res.json()
    assert.equal(body.sandboxId, sbx.sandboxId)
    assert.equal(body.code, 502)

    const resumed = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal(resumed.sandboxId, sbx.sandboxId)
    assert.equal(await resumed.isRunning(), true)
    assert.equal((await resumed.getInfo()).state, 'running')
    assert.equal(await resumed.files.read('/home/user/keep.txt'), marker)
    assert.ok(await alive(resumed, sleeper.pid), `background sleep (pid ${sleeper.pid}) did not survive`)
    const after = await proxyFetch(sbx.sandboxId, 8000, '/index.txt')
    assert.equal(after.status, 200)
    assert.equal(await after.text(), 'served before pause')
    // the old handle works again too
    assert.equal((await sbx.commands.run('echo back')).stdout, 'back\n')
  })

  it('instance connect() resumes; paused time does not count against the timeout', async () => {
    const sbx = await ctx.create({ timeoutMs: 6_000 })
    await sbx.files.write('/home/user/t.txt', 'x')
    assert.equal(await sbx.pause(), true)
    await sleep(9_000) // longer than the 6 s timeout
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
    await sbx.connect({ timeoutMs: 120_000 })
    assert.equal(await sbx.isRunning(), true)
    assert.equal(await sbx.files.read('/home/user/t.txt'), 'x')
    const info = await sbx.getInfo()
    assert.equal(info.state, 'running')
    assert.ok(info.endAt.getTime() > Date.now() + 100_000, `endAt ${info.endAt.toISOString()} not extended`)
  })

  it("lifecycle onTimeout 'pause': paused (not killed) at the timeout, and resumable", async () => {
    const sbx = await ctx.create({ timeoutMs: 4_000, lifecycle: { onTimeout: 'pause' } })
    await sbx.files.write('/home/user/auto.txt', 'auto-paused')
    if (!ctx.is219) {
      const lc = (await sbx.getInfo()).lifecycle
      assert.deepEqual(lc, { onTimeout: 'pause', autoResume: false })
    }
    await waitFor(async () => (await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state === 'paused', {
      timeoutMs: 20_000, intervalMs: 500, what: 'the sandbox to be auto-paused',
    })
    assert.equal(await sbx.isRunning(), false)
    const again = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal(await again.files.read('/home/user/auto.txt'), 'auto-paused')
  })

  it('autoResume: a request through the proxy to an auto-paused sandbox resumes it and is answered; one without the traffic or access token is refused and wakes nothing', async () => {
    const sbx = await ctx.create({
      timeoutMs: 120_000, lifecycle: { onTimeout: 'pause', autoResume: true }, network: { allowPublicTraffic: false },
    })
    const token = { 'e2b-traffic-access-token': sbx.trafficAccessToken }
    const server = await startHttpServer(sbx, 8000, '/home/user/www', { 'index.txt': 'woken up' })
    // Drop the SDK's stream of the background command: when the pause cuts it, SDK 2.51 probes
    // the agent's /health, and that request (being traffic) would auto-resume the sandbox at once.
    await server.disconnect()
    await sbx.setTimeout(2_000)
    await waitFor(async () => (await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state === 'paused', {
      timeoutMs: 20_000, intervalMs: 500, what: 'the sandbox to be auto-paused',
    })
    for (const headers of [{}, { 'e2b-traffic-access-token': 'wrong' }]) {
      const refused = await proxyFetch(sbx.sandboxId, 8000, '/index.txt', { headers })
      assert.equal(refused.status, 403)
      await refused.arrayBuffer()
    }
    // Nor does a request to its agent without the access token (the sandbox is secure).
    const noToken = await proxyFetch(sbx.sandboxId, 49983, '/process.Process/List', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}',
    })
    assert.equal(noToken.status, 401)
    await noToken.arrayBuffer()
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'paused', 'a refused request resumed the sandbox')
    const res = await proxyFetch(sbx.sandboxId, 8000, '/index.txt', { headers: token })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'woken up')
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'running')
    // the SDK's own traffic (envd port) works again as well
    assert.equal((await sbx.commands.run('echo ok')).stdout, 'ok\n')
  })
})

describeEachSdk('list: state filters and paging', (ctx) => {
  it('limit + nextToken pages through every sandbox once; state filters split running and paused', async () => {
    const sbxs = []
    for (let i = 0; i < 3; i++) sbxs.push(await ctx.create({ metadata: { n: String(i) } }))
    const all = sbxs.map((s) => s.sandboxId).sort()
    assert.equal(await sbxs[1].pause(), true)

    const query = { metadata: { e2e: ctx.tag } }
    const pager = ctx.sdk.Sandbox.list({ query, limit: 1 })
    const pages = []
    while (pager.hasNext) {
      const items = await pager.nextItems()
      pages.push(items.map((s) => s.sandboxId))
      assert.ok(pages.length <= 4, 'too many pages')
    }
    const seen = pages.flat()
    assert.ok(pages.every((p) => p.length <= 1), `a page exceeds the limit: ${JSON.stringify(pages)}`)
    assert.deepEqual([...seen].sort(), all, `pages ${JSON.stringify(pages)}`)

    const first = ctx.sdk.Sandbox.list({ query, limit: 2 })
    const p1 = await first.nextItems()
    assert.equal(p1.length, 2)
    assert.equal(first.hasNext, true)
    assert.ok(first.nextToken, 'nextToken after a full page')
    const second = ctx.sdk.Sandbox.list({ query, limit: 2, nextToken: first.nextToken })
    const p2 = await second.nextItems()
    assert.equal(second.hasNext, false)
    assert.deepEqual([...p1, ...p2].map((s) => s.sandboxId).sort(), all)

    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['paused']), [sbxs[1].sandboxId])
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['running']), [sbxs[0].sandboxId, sbxs[2].sandboxId].sort())
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['running', 'paused']), all)
    const paused = (await listAll(ctx.sdk.Sandbox.list({ query: { ...query, state: ['paused'] } })))[0]
    assert.equal(paused.state, 'paused')
    assert.deepEqual(paused.metadata, { e2e: ctx.tag, n: '1' })
  })
})
