// A sandbox's boots, as its kernel tells them: /proc/sys/kernel/random/boot_id. A pause that keeps
// memory resumes the same boot; a filesystem-only pause (pause({ keepMemory: false })) comes back
// as a new boot, as on E2B. Only gVisor gives each sandbox a kernel of its own: under runc every
// container reads the host's boot id, and runc refuses any mount over a path inside /proc
// ("cannot be mounted because it is inside /proc"), so there the new boot is seen only in the
// agent's restart, not in boot_id.
import { it } from 'node:test'
import { useServer } from './harness.mjs'
import { assert, describeEachSdk } from './helpers.mjs'

await useServer()

const gvisor = process.env.WARREN_RUNTIME === 'gvisor'
const bootId = async (sbx) => (await sbx.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()
const agentStart = async (sbx) => (await sbx.commands.run('stat -c %Y /proc/1')).stdout.trim()

describeEachSdk('boots', (ctx) => {
  it('a memory-keeping pause resumes the same boot; a filesystem-only pause reboots', async () => {
    const sbx = await ctx.create({ timeoutMs: 300_000 })
    const first = await bootId(sbx)
    assert.match(first, /^[0-9a-f-]{36}$/)
    const startedAt = await agentStart(sbx)

    await sbx.pause()
    let back = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal(await bootId(back), first, 'a frozen or checkpointed sandbox keeps its boot')
    assert.equal(await agentStart(back), startedAt, 'its agent kept running')
    if (ctx.is219) return // 2.19's pause has no keepMemory

    await ctx.sdk.Sandbox.pause(sbx.sandboxId, { keepMemory: false })
    assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
    await new Promise((r) => setTimeout(r, 1100)) // /proc/1's time has a one-second grain
    back = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.notEqual(await agentStart(back), startedAt, 'a filesystem-only pause restarts the agent')
    const host = (await import('node:fs')).readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
    if (gvisor) {
      assert.notEqual(await bootId(back), first, 'a filesystem-only pause is a new boot')
    } else {
      assert.equal(await bootId(back), host, 'under runc a container reads the host boot id')
    }
    await back.kill()
  })
})
