// Restarts with nothing lost. This file runs its own private `warren serve` (never the shared
// one), because it kills it:
//   * kill -9 of the server, then a restart on the same state dir and port: running and paused
//     sandboxes are still there, with their files, processes and servers, and usable;
//   * kill -9 of the server with a template built and a build running: the template, its
//     build and logs are still there, the cut build is reported failed;
//   * a restart of dockerd (stopping every container on the main engine; the gVisor test engine
//     runs with --live-restore, so its containers stay): after the server reconciles, both
//     sandboxes come back through connect with their files. It disturbs
//     everything else on the engine, so it runs only in CI (env CI set) or with
//     WARREN_E2E_RESTART_DOCKERD=1.
import { it } from 'node:test'
import { useServer } from './harness.mjs'
import { assert, describeEachSdk, waitFor, listTagged, proxyFetch, startHttpServer, uid, dockerd, restartDockerd } from './helpers.mjs'

const h = await useServer({ private: true, args: ['--reconcile-interval', '2s'] })
const alive = async (sbx, pid) => (await sbx.commands.run(`kill -0 ${pid}`).catch((e) => e)).exitCode === 0

describeEachSdk('server restart', (ctx) => {
  it('kill -9 of the server, restart on the same state dir: running and paused sandboxes are there and usable', async () => {
    const a = await ctx.create({ timeoutMs: 600_000, metadata: { role: 'running' } })
    const b = await ctx.create({ timeoutMs: 600_000, metadata: { role: 'paused' } })
    const ma = `a ${uid()}`
    const mb = `b ${uid()}`
    await a.files.write('/home/user/a.txt', ma)
    await b.files.write('/home/user/b.txt', mb)
    const sleeper = await a.commands.run('sleep 3600', { background: true, timeoutMs: 0 })
    await startHttpServer(a, 8000, '/home/user/www', { 'index.txt': 'still serving' })
    assert.equal(await b.pause(), true)
    const endA = (await a.getInfo()).endAt

    await h.server.kill9()
    await h.server.start()

    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag), [a.sandboxId, b.sandboxId].sort())
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['running']), [a.sandboxId])
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['paused']), [b.sandboxId])
    const infoA = await a.getInfo()
    assert.equal(infoA.state, 'running')
    assert.ok(Math.abs(infoA.endAt - endA) < 2_000, `endAt changed: ${endA.toISOString()} → ${infoA.endAt.toISOString()}`)

    // the running one never stopped: same files, same processes, same server
    assert.equal(await a.isRunning(), true)
    assert.equal(await a.files.read('/home/user/a.txt'), ma)
    assert.ok(await alive(a, sleeper.pid), 'the background sleep did not survive the server restart')
    const res = await proxyFetch(a.sandboxId, 8000, '/index.txt')
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'still serving')

    // the paused one resumes
    assert.equal(await b.isRunning(), false)
    const b2 = await ctx.sdk.Sandbox.connect(b.sandboxId)
    assert.equal(await b2.files.read('/home/user/b.txt'), mb)

    // and the restarted server does everything else as before
    const c = await ctx.create()
    assert.equal((await c.commands.run('echo new')).stdout, 'new\n')
    for (const s of [a, b, c]) assert.equal(await ctx.sdk.Sandbox.kill(s.sandboxId), true)
  })

  it('kill -9 of the server: templates, their builds and logs survive; a build cut short is reported failed [Template API: 2.51 only]', { skip: ctx.is219 && 'e2b 2.19 has no Template.build' }, async () => {
    const { Template } = ctx.sdk
    const name = `e2e-restart-${uid()}`
    const slow = `e2e-restart-slow-${uid()}`
    const mark = uid()
    try {
      const built = await Template.build(Template().fromImage('warren/base').runCmd(`echo ${mark} > /tmp/mark`), name)
      const cut = await Template.buildInBackground(Template().fromImage('warren/base').runCmd(`sleep 600 # ${uid()}`), slow)
      await waitFor(async () => (await Template.getBuildStatus(cut)).status === 'building', {
        timeoutMs: 30_000, intervalMs: 200, what: 'the slow build to start',
      })

      await h.server.kill9()
      await h.server.start()

      assert.equal(await Template.exists(name), true)
      const status = await Template.getBuildStatus(built, { logsOffset: 0 })
      assert.equal(status.status, 'ready')
      assert.ok(status.logEntries.some((e) => e.message.includes(mark)), 'the build log is gone')
      const cutStatus = await Template.getBuildStatus(cut)
      assert.equal(cutStatus.status, 'error')
      assert.match(cutStatus.reason?.message ?? '', /interrupted by a server restart/)
      const sbx = await ctx.sdk.Sandbox.create(name)
      try {
        assert.equal((await sbx.commands.run('cat /tmp/mark')).stdout.trim(), mark)
      } finally {
        await sbx.kill()
      }
    } finally {
      for (const t of [name, slow]) await h.server.api(`/templates/${t}`, { method: 'DELETE' }).catch(() => {})
    }
  })

  it('dockerd restart: after the server reconciles, running and paused sandboxes come back with their files (WARREN_E2E_RESTART_DOCKERD=1 only)', { skip: !dockerd && 'set WARREN_E2E_RESTART_DOCKERD=1 (CI does)', timeout: 300_000 }, async () => {
    const a = await ctx.create({ timeoutMs: 600_000, metadata: { role: 'running' } })
    const b = await ctx.create({ timeoutMs: 600_000, metadata: { role: 'paused' } })
    const ma = `a ${uid()}`
    const mb = `b ${uid()}`
    await a.files.write('/home/user/a.txt', ma)
    await b.files.write('/home/user/b.txt', mb)
    assert.equal(await b.pause(), true)
    // Under gVisor a third sandbox is checkpointed (the operator's stop): its checkpoint must
    // outlive the engine's restart. A process keeps a value only in its memory.
    let checkpointed
    if (process.env.WARREN_RUNTIME === 'gvisor') {
      const sbx = await ctx.create({ timeoutMs: 600_000 })
      await sbx.commands.run(`nohup sh -c 'v=$(cat /proc/sys/kernel/random/uuid); while true; do echo $v > /tmp/mem.new; mv /tmp/mem.new /tmp/mem; sleep 0.2; done' >/dev/null 2>&1 &
sleep 0.5`)
      const value = (await sbx.commands.run('cat /tmp/mem')).stdout.trim()
      const res = await fetch(`${h.url}/sandboxes/${sbx.sandboxId}/stop`, { method: 'POST', headers: { 'X-API-Key': h.apiKey } })
      assert.ok(res.ok, `stop: ${res.status} ${await res.text()}`)
      checkpointed = { sbx, value }
    }

    await restartDockerd()

    // A user reconnects (which resumes whatever the engine restart stopped) and finds the files.
    const back = async (id, file, want) =>
      waitFor(async () => {
        const s = await ctx.sdk.Sandbox.connect(id)
        return (await s.files.read(file)) === want ? s : undefined
      }, { timeoutMs: 90_000, intervalMs: 1_000, what: `sandbox ${id} to be usable again` })
    const a2 = await back(a.sandboxId, '/home/user/a.txt', ma)
    const b2 = await back(b.sandboxId, '/home/user/b.txt', mb)
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['running']), [a.sandboxId, b.sandboxId].sort())
    for (const s of [a2, b2]) assert.equal((await s.commands.run('echo up')).stdout, 'up\n')
    if (checkpointed) {
      const c2 = await ctx.sdk.Sandbox.connect(checkpointed.sbx.sandboxId)
      assert.equal((await c2.commands.run('sleep 0.5; pgrep -f mem.new >/dev/null && cat /tmp/mem')).stdout.trim(), checkpointed.value,
        'the checkpointed sandbox came back with its process and the value in its memory')
    }
    // the server itself kept serving
    const c = await ctx.create()
    assert.equal(await c.isRunning(), true)
  })
})
