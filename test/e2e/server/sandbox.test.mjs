// Sandbox basics against a real `warren serve`: create (metadata, envs, timeout), getInfo,
// list by metadata and state, connect to a running sandbox, setTimeout (lengthen, shorten, 0),
// kill, isRunning, and a bogus API key.
import { it, before } from 'node:test'
import { useServer } from './harness.mjs'
import { assert, describeEachSdk, rejectsWith, waitFor, listTagged, uid, SDKS } from './helpers.mjs'

await useServer()

/** Asserts two dates are within toleranceMs of each other. */
function near(actual, expected, toleranceMs, what) {
  const d = Math.abs(actual.getTime() - expected.getTime())
  assert.ok(d <= toleranceMs, `${what}: ${actual.toISOString()} is ${d} ms from ${expected.toISOString()} (tolerance ${toleranceMs} ms)`)
}

describeEachSdk('Sandbox create, getInfo, list, connect, setTimeout', (ctx) => {
  const odd = `a=b&c d/${uid()}` // exercises the metadata query encoding of list()
  let sbx
  let createdAt
  before(async () => {
    createdAt = new Date()
    sbx = await ctx.create({
      metadata: { purpose: 'basics', odd },
      envs: { WARREN_E2E_FOO: 'foo bar', WARREN_E2E_EMPTY: '' },
      timeoutMs: 120_000,
    })
  })

  it('create returns a running sandbox with a lowercase alphanumeric ID, its envs and timeout', async () => {
    assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
    assert.equal(await sbx.isRunning(), true)
    const r = await sbx.commands.run('printf %s "$WARREN_E2E_FOO"; echo; whoami; pwd')
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'foo bar\nuser\n/home/user\n')
    const info = await sbx.getInfo()
    near(info.endAt, new Date(createdAt.getTime() + 120_000), 10_000, 'endAt')
    near(info.startedAt, createdAt, 10_000, 'startedAt')
  })

  it('getInfo (instance and static) shows ID, template, state, metadata and resources', async () => {
    const info = await sbx.getInfo()
    const again = await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)
    for (const i of [info, again]) {
      assert.equal(i.sandboxId, sbx.sandboxId)
      assert.equal(i.templateId, 'base')
      assert.equal(i.state, 'running')
      assert.deepEqual(i.metadata, { e2e: ctx.tag, purpose: 'basics', odd })
      assert.ok(i.cpuCount >= 1, `cpuCount ${i.cpuCount}`)
      assert.ok(i.memoryMB >= 128, `memoryMB ${i.memoryMB}`)
      assert.match(i.envdVersion, /^\d+\.\d+\.\d+/)
      assert.ok(i.endAt > i.startedAt)
    }
  })

  it('list finds it by metadata (all pairs must match) and by state', async () => {
    const byTag = await listTagged(ctx.sdk, ctx.tag)
    assert.deepEqual(byTag, [sbx.sandboxId])
    const items = await ctx.sdk.Sandbox.list({ query: { metadata: { e2e: ctx.tag, odd } } }).nextItems()
    assert.deepEqual(items.map((s) => s.sandboxId), [sbx.sandboxId])
    const s = items[0]
    assert.equal(s.state, 'running')
    assert.equal(s.templateId, 'base')
    assert.deepEqual(s.metadata, { e2e: ctx.tag, purpose: 'basics', odd })
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['running']), [sbx.sandboxId])
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['paused']), [])
    const none = await ctx.sdk.Sandbox.list({ query: { metadata: { e2e: ctx.tag, odd: 'other' } } }).nextItems()
    assert.deepEqual(none, [])
  })

  it('connect to a running sandbox returns the same sandbox and never shortens endAt', async () => {
    await sbx.files.write('/home/user/connect.txt', 'still here')
    const before = (await sbx.getInfo()).endAt
    const again = await ctx.sdk.Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 })
    assert.equal(again.sandboxId, sbx.sandboxId)
    assert.equal(await again.files.read('/home/user/connect.txt'), 'still here')
    near((await again.getInfo()).endAt, before, 2_000, 'endAt after connect with a shorter timeout')
    const t0 = Date.now()
    await ctx.sdk.Sandbox.connect(sbx.sandboxId, { timeoutMs: 600_000 })
    near((await sbx.getInfo()).endAt, new Date(t0 + 600_000), 10_000, 'endAt after connect with a longer timeout')
  })

  it('setTimeout lengthens and shortens endAt', async () => {
    let t0 = Date.now()
    await sbx.setTimeout(900_000)
    near((await sbx.getInfo()).endAt, new Date(t0 + 900_000), 10_000, 'endAt after setTimeout(900 s)')
    t0 = Date.now()
    await ctx.sdk.Sandbox.setTimeout(sbx.sandboxId, 300_000)
    near((await sbx.getInfo()).endAt, new Date(t0 + 300_000), 10_000, 'endAt after static setTimeout(300 s)')
    assert.equal(await sbx.isRunning(), true)
  })

  it('setTimeout shortened to 3 s: the sandbox is gone soon after', async () => {
    const short = await ctx.create({ timeoutMs: 120_000 })
    await short.setTimeout(3_000)
    const t0 = Date.now()
    await waitFor(async () => !(await short.isRunning()), { timeoutMs: 20_000, intervalMs: 500, what: 'the sandbox to stop running' })
    assert.ok(Date.now() - t0 >= 1_000, 'stopped too early')
    // The container goes before the record does, so allow the server a moment to forget it.
    await waitFor(async () => (await short.getInfo().then(() => undefined, (e) => e)) instanceof ctx.sdk.SandboxNotFoundError, {
      timeoutMs: 5_000, what: 'getInfo of the expired sandbox to be SandboxNotFoundError',
    })
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag), [sbx.sandboxId])
    await rejectsWith(ctx.sdk.Sandbox.connect(short.sandboxId), ctx.sdk.SandboxNotFoundError)
  })

  it('setTimeout(0) ends the sandbox at once: killed, or paused when its lifecycle pauses on timeout', async () => {
    const doomed = await ctx.create({ timeoutMs: 120_000 })
    await doomed.setTimeout(0)
    assert.equal(await doomed.isRunning(), false)
    await rejectsWith(ctx.sdk.Sandbox.getInfo(doomed.sandboxId), ctx.sdk.SandboxNotFoundError)
    if (ctx.is219) return // 2.19 has no lifecycle option
    const pausing = await ctx.create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause' } })
    await pausing.files.write('/home/user/kept.txt', 'kept')
    await pausing.setTimeout(0)
    assert.equal((await pausing.getInfo()).state, 'paused')
    const back = await ctx.sdk.Sandbox.connect(pausing.sandboxId)
    assert.equal(await back.files.read('/home/user/kept.txt'), 'kept')
    await back.kill()
  })

  it('kill: true, then false; the sandbox is not listed, not running, and cannot be connected', async () => {
    const victim = await ctx.create({ metadata: { purpose: 'kill' } })
    const files = victim.files
    if (ctx.is219) {
      // 2.19's instance kill() resolves to undefined; its static kill returns the boolean.
      assert.equal(await ctx.sdk.Sandbox.kill(victim.sandboxId), true)
    } else {
      assert.equal(await victim.kill(), true)
    }
    assert.equal(await ctx.sdk.Sandbox.kill(victim.sandboxId), false)
    assert.equal(await victim.isRunning(), false)
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag), [sbx.sandboxId])
    await rejectsWith(ctx.sdk.Sandbox.getInfo(victim.sandboxId), ctx.sdk.SandboxNotFoundError)
    await rejectsWith(ctx.sdk.Sandbox.connect(victim.sandboxId), ctx.sdk.SandboxNotFoundError)
    await assert.rejects(files.read('/etc/hostname'))
  })

  it('kill of an unknown sandbox ID is false', async () => {
    assert.equal(await ctx.sdk.Sandbox.kill(`nonexisting${uid()}`), false)
  })
})

for (const [version, sdk] of SDKS) {
  it(`a bogus API key is refused with AuthenticationError [${version}]`, async () => {
    const apiKey = `e2b_${'0'.repeat(40)}`
    const tag = `e2e-${uid()}`
    await rejectsWith(sdk.Sandbox.create({ apiKey, metadata: { e2e: tag } }), sdk.AuthenticationError)
    await rejectsWith(sdk.Sandbox.list({ apiKey }).nextItems(), sdk.AuthenticationError)
    await rejectsWith(sdk.Sandbox.kill('abc', { apiKey }), sdk.AuthenticationError)
    // nothing was created with the bad key
    assert.deepEqual(await listTagged(sdk, tag), [])
  })
}
