// A container killed or removed behind the server's back (docker kill, docker rm -f) is
// reported within moments, not at the next periodic reconcile (30 s by default, which the
// shared server keeps): the server follows the engine's events. What it reports is what the
// periodic reconcile would: a killed container's sandbox is paused (stopped) and resumes on
// connect, a removed one's is gone (404). Its open streams are cut at once and nothing of it
// is left on the engine.
import { it } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { useServer, LABEL_MANAGED } from './harness.mjs'
import { assert, describeEachSdk, waitFor, listTagged } from './helpers.mjs'

const run = promisify(execFile)
await useServer()

/** The IDs of the containers (any state) of a sandbox, found by its label. */
async function containersOf(sandboxId) {
  const { stdout } = await run('docker', ['ps', '-aq', '--no-trunc', '--filter', `label=dev.warren.sandbox=${sandboxId}`, '--filter', `label=${LABEL_MANAGED}`])
  return stdout.split('\n').filter(Boolean)
}

// Well under the 30 s reconcile interval; the engine's event arrives in milliseconds.
const SOON_MS = 3_000

describeEachSdk('engine events', (ctx) => {
  it('docker kill: the sandbox is paused within seconds, its streams end, and it resumes on connect', async () => {
    const sbx = await ctx.create({ timeoutMs: 300_000 })
    await sbx.files.write('/home/user/kept.txt', 'kept')
    const cmd = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 })
    const ended = cmd.wait().then(() => 'exited', () => 'cut')
    const [cid] = await containersOf(sbx.sandboxId)
    assert.ok(cid, 'the sandbox has a container')

    await run('docker', ['kill', cid])
    const t0 = Date.now()
    await waitFor(async () => (await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state === 'paused',
      { timeoutMs: SOON_MS, intervalMs: 100, what: 'the killed sandbox to be reported paused' })
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['running']), [], 'no longer listed as running')
    assert.equal(await Promise.race([ended, new Promise((r) => setTimeout(() => r('still open'), SOON_MS - (Date.now() - t0) + 500))]), 'cut',
      'the command stream ended when the sandbox stopped')

    const back = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal(await back.files.read('/home/user/kept.txt'), 'kept')
    assert.equal((await back.commands.run('echo up')).stdout, 'up\n')
    await back.kill()
  })

  it('docker rm -f: the sandbox is gone (404) within seconds and leaves nothing on the engine', async () => {
    const sbx = await ctx.create({ timeoutMs: 300_000 })
    const [cid] = await containersOf(sbx.sandboxId)
    assert.ok(cid, 'the sandbox has a container')

    await run('docker', ['rm', '-f', cid])
    await waitFor(async () => (await ctx.sdk.Sandbox.getInfo(sbx.sandboxId).catch((e) => e)).constructor.name === 'SandboxNotFoundError',
      { timeoutMs: SOON_MS, intervalMs: 100, what: 'the removed sandbox to be not found' })
    assert.deepEqual(await listTagged(ctx.sdk, ctx.tag, ['running', 'paused']), [])
    assert.deepEqual(await containersOf(sbx.sandboxId), [], 'no container of it is left')
    assert.equal(await sbx.isRunning(), false)
  })
})
