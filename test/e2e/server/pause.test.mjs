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
    // The SDK's stream of the server's command stays open: the pause cuts it, and SDK 2.51 then
    // probes the agent's /health, which must not wake the sandbox.
    await startHttpServer(sbx, 8000, '/home/user/www', { 'index.txt': 'woken up' })
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

describeEachSdk('pause with streams open', (ctx) => {
  // A counter in the background and a watch of its directory, both with their SDK streams kept
  // open; resolves { ticker, watcher, ticks } where ticks collects the counter's stdout.
  const openStreams = async (sbx) => {
    const ticks = []
    const ticker = await sbx.commands.run('i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.1; done', {
      background: true, timeoutMs: 0, onStdout: (d) => ticks.push(d),
    })
    const watcher = await sbx.files.watchDir('/home/user', () => {})
    await waitFor(() => ticks.length > 0, { what: 'the first tick' })
    // The cut streams end in errors the test does not need.
    ticker.wait().catch(() => {})
    return { ticker, watcher, ticks }
  }
  const lastTick = (out) => Math.max(0, ...[...out.join('').matchAll(/tick (\d+)/g)].map((m) => Number(m[1])))
  const stillPaused = async (sbx, what) => {
    await sleep(1_500)
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'paused', `${what} woke the paused sandbox`)
  }
  // connect() resumes the sandbox and commands.connect(pid) follows the counter from where it was.
  const reattach = async (sbx, ticker, before) => {
    const resumed = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal((await resumed.getInfo()).state, 'running')
    const out = []
    const again = await resumed.commands.connect(ticker.pid, { onStdout: (d) => out.push(d), timeoutMs: 0 })
    await waitFor(() => lastTick(out) > before, { what: `ticks after ${before} from the reattached process` })
    await again.kill()
  }

  it('a frozen pause cuts the streams and nothing they do wakes the sandbox; connect resumes it and commands.connect(pid) gets the further output', async () => {
    const sbx = await ctx.create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
    const { ticker, ticks } = await openStreams(sbx)
    assert.equal(await sbx.pause(), true)
    const before = lastTick(ticks)
    await stillPaused(sbx, 'an open stream')
    assert.equal(await sbx.isRunning(), false, 'isRunning() of a paused sandbox')
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'paused', 'isRunning() woke the sandbox')
    await reattach(sbx, ticker, before)
  })

  it('a pause at the timeout (onTimeout pause) with streams open stays paused', async () => {
    const sbx = await ctx.create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
    const { ticker, ticks } = await openStreams(sbx)
    await sbx.setTimeout(2_000)
    await waitFor(async () => (await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state === 'paused', {
      timeoutMs: 20_000, intervalMs: 200, what: 'the sandbox to be auto-paused',
    })
    const before = lastTick(ticks)
    await stillPaused(sbx, 'an open stream')
    await reattach(sbx, ticker, before)
  })

  it('a pause without memory (stopped) with streams open stays paused; connect boots it again', {
    skip: ctx.is219 && 'SDK 2.19 has no keepMemory',
  }, async () => {
    const sbx = await ctx.create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
    await sbx.files.write('/home/user/kept.txt', 'on disk')
    await openStreams(sbx)
    assert.equal(await sbx.pause({ keepMemory: false }), true)
    await stillPaused(sbx, 'an open stream')
    const resumed = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal(await resumed.files.read('/home/user/kept.txt'), 'on disk')
  })

  it('secure, autoResume: GET /health, a CORS preflight and forged signatures answer without waking a paused sandbox; a valid signature or the access token wakes it', async () => {
    const sbx = await ctx.create({ secure: true, timeoutMs: 120_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
    const path = `/home/user/signed-${uid()}.txt`
    await sbx.files.write(path, 'signed content')
    const signed = await sbx.downloadUrl(path, { useSignatureExpiration: 120 })
    const agent = (p, init) => proxyFetch(sbx.sandboxId, 49983, p, init)
    const forged = new URL(signed)
    forged.searchParams.set('signature', 'v1_forged')
    const unexpiring = new URL(signed)
    unexpiring.searchParams.delete('signature_expiration')
    const otherPath = new URL(signed)
    otherPath.searchParams.set('path', '/etc/shadow')
    const asUpload = new URL(signed)

    assert.equal(await sbx.pause(), true)
    const health = await agent('/health')
    assert.equal(health.status, 502, 'the health of a paused sandbox')
    assert.equal((await health.json()).code, 502)
    const preflight = await agent('/process.Process/Start', {
      method: 'OPTIONS',
      headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'x-access-token,content-type' },
    })
    assert.equal(preflight.status, 204)
    assert.equal(preflight.headers.get('access-control-allow-origin'), '*')
    assert.equal(preflight.headers.get('access-control-allow-headers'), 'x-access-token,content-type')
    const bareOptions = await agent('/process.Process/Start', { method: 'OPTIONS' })
    assert.equal(bareOptions.status, 401, 'OPTIONS that is no preflight needs the token')
    await bareOptions.arrayBuffer()
    for (const u of [forged, unexpiring, otherPath]) {
      const res = await agent(u.pathname + u.search)
      assert.equal(res.status, 401, u.search)
      assert.deepEqual(await res.json(), { code: 401, message: 'invalid signature' })
    }
    const wrongOp = await agent(asUpload.pathname + asUpload.search, { method: 'POST', body: new FormData() })
    assert.equal(wrongOp.status, 401, 'a download signature used for an upload')
    await wrongOp.arrayBuffer()
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'paused', 'an unauthenticated request woke the sandbox')

    const good = await agent(`${new URL(signed).pathname}${new URL(signed).search}`)
    assert.equal(good.status, 200)
    assert.equal(await good.text(), 'signed content')
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'running')

    // The SDK's own requests carry the access token: they wake it too.
    assert.equal(await sbx.pause(), true)
    assert.equal(await sbx.files.read(path), 'signed content')
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'running')
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
