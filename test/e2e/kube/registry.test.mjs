// The Kubernetes engine with --registry, against the real cluster and its registry
// (scripts/kube.sh up starts CNCF Distribution on 127.0.0.1:15000): the images the builder has
// are pushed there, at the end of a template's build or before the first pod of an image, and
// pods pull them by digest on any node, with nothing imported into the nodes; the warm pool's
// pods are spread over both nodes; a snapshot, once copied into the builder, is pushed too and
// its sandboxes pull it on any node; a pause without memory commits such a pod on its node and
// resumes there.
//
// Runs only under kube-run.sh (WARREN_ENGINE=kubernetes, WARREN_E2E_KUBE_REGISTRY).
import { it, before } from 'node:test'
import { useServer, RUN_ID } from '../server/harness.mjs'
import { assert, describeEachSdk, waitFor, uid, kubectl } from '../server/helpers.mjs'

const registry = process.env.WARREN_E2E_KUBE_REGISTRY || '127.0.0.1:15000'
const prefix = `${registry}/e2e-${RUN_ID}`
const h = await useServer({ private: true, args: ['--registry', prefix, '--warm-pool', '4', '--warm-pool-code-interpreter', '0'] })

before(async () => {
  assert.equal(process.env.WARREN_ENGINE, 'kubernetes', 'run this file through test/e2e/kube-run.sh')
  const res = await fetch(`http://${registry}/v2/`).catch((e) => e)
  assert.equal(res.status, 200, `no registry answers at http://${registry}/v2/ (scripts/kube.sh up starts it): ${res}`)
})

/** The pods of this file's server, by sandbox ID. */
const pods = async () => {
  const list = JSON.parse(await kubectl('get', 'pods', '-l', `dev.warren.managed=${h.server.name}`, '-o', 'json'))
  return new Map(list.items.map((p) => [p.metadata.labels['dev.warren.sandbox'], p]))
}
const sandboxContainer = (pod) => pod.spec.containers.find((c) => c.name === 'sandbox')
const tags = async (repo) => (await (await fetch(`http://${registry}/v2/${repo}/tags/list`)).json()).tags ?? []

describeEachSdk('kubernetes engine with a registry', (ctx) => {
  it('the warm pool\'s pods run the pushed image, spread over both nodes', async () => {
    let pool = []
    await waitFor(async () => {
      pool = [...(await pods()).values()].filter((p) => p.metadata.labels['dev.warren.pool'] === 'true' && p.status.phase === 'Running')
      return pool.length >= 4
    }, { timeoutMs: 120_000, intervalMs: 500, what: '4 warm pool pods running' })
    assert.deepEqual(new Set(pool.map((p) => p.spec.nodeName)).size, 2, `pool pods on ${pool.map((p) => p.spec.nodeName)}`)
    for (const p of pool) assert.match(sandboxContainer(p).image, /@sha256:[0-9a-f]{64}$/)
  })

  it('a template built here is pushed to the registry, and its sandboxes pull it by digest on both nodes', { skip: !ctx.sdk.Template && 'this SDK has no Template' }, async () => {
    const { Template } = ctx.sdk
    const name = `e2e-kube-reg-${uid()}`
    const logs = []
    await Template.build(Template().fromImage('warren/base').runCmd(`echo ${name} > /tmp/built`), name, { onBuildLogs: (l) => logs.push(String(l.message ?? l)) })
    const pushed = logs.find((l) => l.includes(`pushed as ${prefix}/`))
    assert.ok(pushed, `the build log does not say the image was pushed: ${logs.slice(-5)}`)
    assert.ok(!logs.some((l) => l.includes('importing the image into the cluster')), 'the image was imported into the nodes too')
    const digestRef = pushed.match(/pushed as (\S+@sha256:[0-9a-f]{64})/)?.[1]
    assert.ok(digestRef, `no digest in ${pushed}`)
    const repo = digestRef.slice(registry.length + 1, digestRef.indexOf('@'))
    assert.ok((await tags(repo)).length > 0, `the registry has no tag of ${repo}`)
    try {
      const sbxs = await Promise.all([1, 2, 3, 4, 5, 6].map(() => ctx.create(name, { timeoutMs: 120_000 })))
      const byId = await pods()
      for (const s of sbxs) {
        const p = byId.get(s.sandboxId)
        assert.equal(sandboxContainer(p).image, digestRef)
        assert.equal(sandboxContainer(p).imagePullPolicy, 'IfNotPresent')
        assert.equal(p.spec.affinity?.nodeAffinity, undefined, 'a pod of a pushed image is pinned to nodes')
        assert.equal((await s.commands.run('cat /tmp/built')).stdout, `${name}\n`)
      }
      const nodes = new Set(sbxs.map((s) => byId.get(s.sandboxId).spec.nodeName))
      assert.equal(nodes.size, 2, `6 sandboxes on nodes ${[...nodes]}`)
      for (const s of sbxs) assert.equal(await ctx.sdk.Sandbox.kill(s.sandboxId), true)
    } finally {
      await h.server.api(`/templates/${name}`, { method: 'DELETE' }).catch(() => {})
    }
  })

  it('a snapshot is pushed once copied into the builder: its sandboxes then pull it by digest on any node', async () => {
    const src = await ctx.create({ timeoutMs: 300_000 })
    await src.files.write('/home/user/snap.txt', 'pushed')
    const snap = await src.createSnapshot()
    const repo = `e2e-${RUN_ID}/warren/snapshot`
    const before = (await tags(repo).catch(() => [])).length
    await waitFor(async () => (await tags(repo).catch(() => [])).length > before, { timeoutMs: 120_000, intervalMs: 500, what: 'the snapshot in the registry' })
    try {
      const sbxs = await Promise.all([1, 2, 3, 4].map(() => ctx.create(snap.snapshotId, { timeoutMs: 300_000 })))
      const byId = await pods()
      for (const s of sbxs) {
        const p = byId.get(s.sandboxId)
        assert.match(sandboxContainer(p).image, new RegExp(`^${prefix.replace(/\./g, '\\.')}/warren/snapshot@sha256:[0-9a-f]{64}$`))
        assert.equal(p.spec.affinity?.nodeAffinity, undefined, 'a pod of a pushed snapshot is pinned to nodes')
        assert.equal(await s.files.read('/home/user/snap.txt'), 'pushed')
      }
      for (const s of [src, ...sbxs]) assert.equal(await ctx.sdk.Sandbox.kill(s.sandboxId), true)
    } finally {
      await ctx.sdk.Sandbox.deleteSnapshot(snap.snapshotId)
    }
  })

  it('a sandbox of the base image runs it from the registry; a pause without memory resumes on its node', { skip: ctx.is219 && 'SDK 2.19 has no keepMemory' }, async () => {
    const sbx = await ctx.create({ timeoutMs: 300_000 })
    const p = (await pods()).get(sbx.sandboxId)
    assert.match(sandboxContainer(p).image, new RegExp(`^${prefix.replace(/\./g, '\\.')}/warren/base@sha256:[0-9a-f]{64}$`))
    assert.ok((await tags('e2e-' + RUN_ID + '/warren/base')).includes('latest'), 'warren/base is not in the registry')
    const mark = uid()
    await sbx.files.write('/home/user/reg.txt', mark)
    assert.equal(await sbx.pause({ keepMemory: false }), true)
    await waitFor(async () => !(await pods()).has(sbx.sandboxId), { timeoutMs: 60_000, intervalMs: 250, what: 'the stopped sandbox\'s pod to go' })
    const resumed = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal(await resumed.files.read('/home/user/reg.txt'), mark)
    assert.equal((await pods()).get(sbx.sandboxId).spec.nodeName, p.spec.nodeName)
    assert.equal(await ctx.sdk.Sandbox.kill(sbx.sandboxId), true)
  })
})
