// Snapshots and fork against a real `warren serve`: createSnapshot, create from a snapshot with
// the files preserved, listSnapshots (all and by sandbox), deleteSnapshot; fork (state copied,
// sandboxes independent, count). Fork only exists from SDK 2.4x, so it runs with 2.51 only.
import { it, after } from 'node:test'
import { useServer } from './harness.mjs'
import { assert, describeEachSdk, rejectsWith, listAll, listTagged, uid, waitFor, engineHasImage, removeEngineImage, sandboxImage } from './helpers.mjs'

await useServer()

// The engine side (what an operator sees in `docker images`, or in the nodes' containerd on
// the Kubernetes engine): a deleted snapshot, or a fork whose sandboxes are all gone, must not
// leave its image behind. Images the server leaks are removed after the file so a failing run
// leaves nothing either.
const images = new Set()
const imageExists = engineHasImage
const containerImage = sandboxImage
// Only the server's own images (of forks and snapshots) are ever removed here: never a base image.
const serversOwn = (ref) => /(^|\/)warren\/(fork|snapshot):/.test(ref)
after(async () => {
  for (const ref of images) if (serversOwn(ref) && (await imageExists(ref))) await removeEngineImage(ref)
})
const gone = (ref, what) => waitFor(async () => !(await imageExists(ref)), { timeoutMs: 10_000, intervalMs: 250, what })

describeEachSdk('snapshots', (ctx) => {
  it('createSnapshot; create from it (files as at the snapshot); listSnapshots; deleteSnapshot', async () => {
    const src = await ctx.create({ timeoutMs: 300_000 })
    const v1 = `v1 ${uid()}`
    await src.files.write('/home/user/snap/data.txt', v1)
    await src.commands.run('sudo sh -c "echo root-file > /opt/snap.txt"')

    const snap = await src.createSnapshot()
    assert.equal(typeof snap.snapshotId, 'string')
    assert.ok(snap.snapshotId.length > 0)
    assert.equal(await src.isRunning(), true, 'the source keeps running after a snapshot')
    await src.files.write('/home/user/snap/data.txt', 'v2 after the snapshot')

    const listed = (await listAll(src.listSnapshots())).map((s) => s.snapshotId)
    assert.deepEqual(listed, [snap.snapshotId], 'listSnapshots of the source sandbox')
    const global = (await listAll(ctx.sdk.Sandbox.listSnapshots())).map((s) => s.snapshotId)
    assert.ok(global.includes(snap.snapshotId), `Sandbox.listSnapshots() lacks ${snap.snapshotId}: ${global}`)
    const bySandbox = (await listAll(ctx.sdk.Sandbox.listSnapshots({ sandboxId: src.sandboxId }))).map((s) => s.snapshotId)
    assert.deepEqual(bySandbox, [snap.snapshotId])

    const a = await ctx.create(snap.snapshotId, { metadata: { from: 'snapshot' } })
    const b = await ctx.create(snap.snapshotId)
    assert.notEqual(a.sandboxId, b.sandboxId)
    for (const s of [a, b]) {
      assert.equal(await s.files.read('/home/user/snap/data.txt'), v1)
      assert.equal(await s.files.read('/opt/snap.txt'), 'root-file\n')
      assert.equal((await s.commands.run('whoami')).stdout, 'user\n')
    }
    await a.files.write('/home/user/snap/data.txt', 'changed in a')
    assert.equal(await b.files.read('/home/user/snap/data.txt'), v1, 'sandboxes from one snapshot are independent')
    assert.equal(await src.files.read('/home/user/snap/data.txt'), 'v2 after the snapshot')

    assert.equal(await ctx.sdk.Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await ctx.sdk.Sandbox.deleteSnapshot(snap.snapshotId), false, 'deleting twice is false')
    const after = (await listAll(ctx.sdk.Sandbox.listSnapshots())).map((s) => s.snapshotId)
    assert.ok(!after.includes(snap.snapshotId), 'deleted snapshot still listed')
    await assert.rejects(ctx.sdk.Sandbox.create(snap.snapshotId, { metadata: { e2e: ctx.tag } }), 'create from a deleted snapshot')
    // sandboxes made from it before the delete keep working
    assert.equal(await b.files.read('/home/user/snap/data.txt'), v1)
    // once they are gone, so is the snapshot's image
    const ref = await containerImage(b.sandboxId)
    assert.ok(ref, 'the image of the sandbox made from the snapshot')
    images.add(ref)
    await ctx.sdk.Sandbox.kill(a.sandboxId)
    await ctx.sdk.Sandbox.kill(b.sandboxId)
    await gone(ref, `image ${ref} of the deleted snapshot to be removed once no sandbox uses it`)
  })

  it('a snapshot of a paused sandbox can be taken, and the sandbox stays paused', async () => {
    const src = await ctx.create()
    await src.files.write('/home/user/p.txt', 'paused data')
    assert.equal(await src.pause(), true)
    const snap = await ctx.sdk.Sandbox.createSnapshot(src.sandboxId)
    try {
      assert.equal((await ctx.sdk.Sandbox.getInfo(src.sandboxId)).state, 'paused')
      const c = await ctx.create(snap.snapshotId)
      assert.equal(await c.files.read('/home/user/p.txt'), 'paused data')
      images.add(await containerImage(c.sandboxId))
    } finally {
      await ctx.sdk.Sandbox.deleteSnapshot(snap.snapshotId)
    }
  })

  it('createSnapshot of an unknown sandbox is SandboxNotFoundError', async () => {
    await rejectsWith(ctx.sdk.Sandbox.createSnapshot(`nonexisting${uid()}`), ctx.sdk.SandboxNotFoundError)
  })
})

describeEachSdk('fork', (ctx) => {
  it('fork copies the state; forks and the source are independent; count gives that many [2.19: no Sandbox.fork, skipped]', { skip: ctx.is219 }, async () => {
    const src = await ctx.create({ timeoutMs: 300_000, metadata: { role: 'source' } })
    const srcImage = await containerImage(src.sandboxId)
    await src.files.write('/home/user/f.txt', 'before fork')
    const forks = await src.fork({ count: 2, timeoutMs: 120_000 })
    assert.equal(forks.length, 2)
    for (const f of forks) {
      assert.ok(!(f instanceof Error), `a fork failed: ${f?.message}`)
      ctx.track(f)
    }
    const [f1, f2] = forks
    assert.notEqual(f1.sandboxId, src.sandboxId)
    assert.notEqual(f1.sandboxId, f2.sandboxId)
    for (const f of forks) {
      assert.equal(await f.isRunning(), true)
      assert.equal(await f.files.read('/home/user/f.txt'), 'before fork')
    }
    await f1.files.write('/home/user/f.txt', 'f1')
    await src.files.write('/home/user/f.txt', 'src')
    assert.equal(await f2.files.read('/home/user/f.txt'), 'before fork')
    assert.equal(await f1.files.read('/home/user/f.txt'), 'f1')
    assert.equal(await src.files.read('/home/user/f.txt'), 'src')
    assert.equal(await src.isRunning(), true)

    assert.equal(await ctx.sdk.Sandbox.kill(src.sandboxId), true)
    assert.equal(await f1.isRunning(), true, 'killing the source leaves the forks')
    const ids = await listTagged(ctx.sdk, ctx.tag)
    assert.deepEqual(ids, [f1.sandboxId, f2.sandboxId].sort())

    const [f3] = await ctx.sdk.Sandbox.fork(f2.sandboxId)
    assert.ok(!(f3 instanceof Error), `static fork failed: ${f3?.message}`)
    ctx.track(f3)
    assert.equal(await f3.files.read('/home/user/f.txt'), 'before fork')

    const refs = [...new Set(await Promise.all([f1, f2, f3].map((f) => containerImage(f.sandboxId))))]
    assert.ok(refs.every(Boolean), 'the images of the forks')
    // A fork runs an image of its own (warren/fork:…), or, under gVisor, its source's image with
    // the source's files copied in: that one stays, the fork's own go with their sandboxes.
    const own = refs.filter(serversOwn)
    assert.deepEqual(refs.filter((r) => !serversOwn(r)), refs.length === own.length ? [] : [srcImage])
    own.forEach((r) => images.add(r))
    for (const f of [f1, f2, f3]) assert.equal(await ctx.sdk.Sandbox.kill(f.sandboxId), true)
    for (const r of own) await gone(r, `fork image ${r} to be removed once its sandboxes are killed`)
    if (srcImage) assert.ok(await imageExists(srcImage), `the source's image ${srcImage} stays`)
  })

  it('fork of a killed sandbox is SandboxNotFoundError [2.19: no Sandbox.fork, skipped]', { skip: ctx.is219 }, async () => {
    const src = await ctx.create()
    await src.kill()
    await rejectsWith(ctx.sdk.Sandbox.fork(src.sandboxId), ctx.sdk.SandboxNotFoundError)
  })
})
