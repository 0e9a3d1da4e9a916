// The Kubernetes engine against a real cluster (test/e2e/kube-run.sh brings it in): sandboxes
// are pods spread over both nodes, hardened, with the agent delivered read-only; a frozen pause
// keeps processes and memory through the node agent; a pod deleted behind the server's back
// kills its sandbox at once; a kill -9 of the control plane loses and leaks nothing; a pause
// without memory commits the pod's files on its node and resumes there, also after a kill -9
// of the control plane; a snapshot and a freshly built template reach the nodes.
//
// Runs only under kube-run.sh, which sets WARREN_ENGINE=kubernetes, WARREN_KUBECONFIG (the
// control plane's service account) and WARREN_E2E_KUBECTL_CONFIG (the cluster's admin, for
// looking at pods). This file starts its own server, since it kills it.
import { it, before } from 'node:test'
import { useServer } from '../server/harness.mjs'
import { assert, describeEachSdk, waitFor, listTagged, proxyFetch, startHttpServer, uid, sleep, kubectl } from '../server/helpers.mjs'

const h = await useServer({ private: true, args: ['--reconcile-interval', '30s', '--warm-pool', '1'] })

before(() => {
  assert.equal(process.env.WARREN_ENGINE, 'kubernetes', 'run this file through test/e2e/kube-run.sh')
})

/** The pods of this file's server, by sandbox ID. */
const pods = async () => {
  const list = JSON.parse(await kubectl('get', 'pods', '-l', `dev.warren.managed=${h.server.name}`, '-o', 'json'))
  return new Map(list.items.map((p) => [p.metadata.labels['dev.warren.sandbox'], p]))
}
const alive = async (sbx, pid) => (await sbx.commands.run(`kill -0 ${pid}`).catch((e) => e)).exitCode === 0
const ms = (t0) => Math.round(performance.now() - t0)

describeEachSdk('kubernetes engine', (ctx) => {
  it('sandboxes are pods on both nodes, hardened, the agent read-only; commands, files and a PTY work', async () => {
    const sbxs = await Promise.all([1, 2, 3, 4, 5, 6].map(() => ctx.create({ timeoutMs: 300_000 })))
    const byId = await pods()
    const nodes = new Set(sbxs.map((s) => byId.get(s.sandboxId)?.spec.nodeName))
    assert.equal(nodes.size, 2, `6 sandboxes on nodes ${[...nodes]}`)
    const p = byId.get(sbxs[0].sandboxId)
    assert.equal(p.spec.automountServiceAccountToken, false)
    assert.equal(p.spec.containers[0].securityContext.capabilities.drop[0], 'ALL')

    const sbx = sbxs[0]
    const r = await sbx.commands.run('id -un; hostname; test -e /var/run/secrets/kubernetes.io && echo token; touch /.warren/warren-agent 2>/dev/null || echo ro')
    assert.equal(r.stdout, `user\n${sbx.sandboxId}\nro\n`)
    const caps = await sbx.commands.run("grep CapBnd /proc/self/status | awk '{print $2}'", { user: 'root' })
    assert.equal(BigInt(`0x${caps.stdout.trim()}`) & (1n << 13n), 0n, 'NET_RAW (13) is in the bounding set')
    await sbx.files.write('/home/user/k.txt', 'on a pod')
    assert.equal(await sbx.files.read('/home/user/k.txt'), 'on a pod')
    const enc = (s) => new TextEncoder().encode(s)
    const dec = new TextDecoder()
    let text = ''
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (text += dec.decode(d)), timeoutMs: 30_000 })
    await sbx.pty.sendInput(pty.pid, enc('echo "pty-$((40+2))"; exit\n'))
    await waitFor(() => text.includes('pty-42'), { timeoutMs: 10_000, what: 'pty output' })
    await startHttpServer(sbx, 8000, '/home/user/www', { 'index.txt': 'from a pod' })
    const res = await proxyFetch(sbx.sandboxId, 8000, '/index.txt')
    assert.equal(await res.text(), 'from a pod')
    // each sandbox answers on its own node
    const seen = await Promise.all(sbxs.map(async (s) => (await s.commands.run('hostname')).stdout.trim()))
    assert.deepEqual(seen, sbxs.map((s) => s.sandboxId))
    for (const s of sbxs) assert.equal(await ctx.sdk.Sandbox.kill(s.sandboxId), true)
    await waitFor(async () => {
      const left = await pods()
      return !sbxs.some((s) => left.has(s.sandboxId))
    }, { timeoutMs: 20_000, intervalMs: 250, what: 'the killed sandboxes\' pods to go' })
  })

  it('frozen pause keeps processes and memory through the node agent; resume thaws them', async () => {
    const sbx = await ctx.create({ timeoutMs: 300_000 })
    const counter = await sbx.commands.run('i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done', { background: true, timeoutMs: 0 })
    await sleep(300)
    let t0 = performance.now()
    assert.equal(await sbx.pause(), true)
    const pauseMs = ms(t0)
    assert.equal((await pods()).get(sbx.sandboxId).metadata.annotations['dev.warren.frozen'], 'true')
    const frozenAt = (await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state
    assert.equal(frozenAt, 'paused')
    t0 = performance.now()
    const resumed = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    const resumeMs = ms(t0)
    const a = Number((await resumed.commands.run('cat /tmp/count')).stdout)
    await sleep(500)
    const b = Number((await resumed.commands.run('cat /tmp/count')).stdout)
    assert.ok(b > a, `the counter did not go on after resume (${a} → ${b})`)
    assert.ok(await alive(resumed, counter.pid), 'the counter died')
    console.log(`kubernetes: frozen pause ${pauseMs} ms, resume (connect) ${resumeMs} ms`)
  })

  it('a pause without memory (stopped) commits the files on the node, deletes the pod, and resumes on that node', { skip: ctx.is219 && 'SDK 2.19 has no keepMemory' }, async () => {
    const sbx = await ctx.create({ timeoutMs: 300_000 })
    const mark = uid()
    await sbx.files.write('/home/user/stopped.txt', mark)
    const node = (await pods()).get(sbx.sandboxId).spec.nodeName
    const pauses = []
    const resumes = []
    let cur = sbx
    for (let i = 0; i < 3; i++) {
      let t0 = performance.now()
      assert.equal(await cur.pause({ keepMemory: false }), true)
      pauses.push(ms(t0))
      assert.equal((await pods()).has(sbx.sandboxId), false, 'the stopped sandbox still has a pod')
      const rec = JSON.parse(await kubectl('get', 'configmap', `warren-${sbx.sandboxId}`, '-o', 'json'))
      assert.equal(rec.data.node, node)
      assert.equal((await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
      t0 = performance.now()
      cur = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
      resumes.push(ms(t0))
      assert.equal(await cur.files.read('/home/user/stopped.txt'), mark)
      await cur.files.write('/home/user/stopped.txt', mark + i)
      await cur.files.write('/home/user/stopped.txt', mark)
      assert.equal((await pods()).get(sbx.sandboxId).spec.nodeName, node, 'resumed on another node')
    }
    await assert.rejects(kubectl('get', 'configmap', `warren-${sbx.sandboxId}`), 'the record of a running sandbox is left')
    const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
    console.log(`kubernetes: stopped pause p50 ${p50(pauses)} ms (${pauses}), resume p50 ${p50(resumes)} ms (${resumes})`)
    assert.equal(await ctx.sdk.Sandbox.kill(sbx.sandboxId), true)
  })

  it('a snapshot is committed on its node; sandboxes of it start there and, once copied, anywhere', async () => {
    const src = await ctx.create({ timeoutMs: 300_000 })
    await src.files.write('/home/user/snap.txt', 'in the snapshot')
    let t0 = performance.now()
    const snap = await src.createSnapshot()
    const snapMs = ms(t0)
    t0 = performance.now()
    const a = await ctx.create(snap.snapshotId, { timeoutMs: 300_000 })
    const fromMs = ms(t0)
    assert.equal(await a.files.read('/home/user/snap.txt'), 'in the snapshot')
    const byId = await pods()
    assert.equal(byId.get(a.sandboxId).spec.nodeName, byId.get(src.sandboxId).spec.nodeName, 'a sandbox of a fresh snapshot runs where it was committed')
    console.log(`kubernetes: snapshot ${snapMs} ms, create from it ${fromMs} ms`)
    for (const s of [src, a]) assert.equal(await ctx.sdk.Sandbox.kill(s.sandboxId), true)
    await ctx.sdk.Sandbox.deleteSnapshot(snap.snapshotId)
  })

  it('a template built here is on both nodes once built: its sandboxes run it', { skip: !ctx.sdk.Template && 'this SDK has no Template' }, async () => {
    const { Template } = ctx.sdk
    const name = `e2e-kube-tpl-${uid()}`
    const t0 = performance.now()
    const logs = []
    await Template.build(Template().fromImage('warren/base').runCmd(`echo ${name} > /tmp/built`), name, { onBuildLogs: (l) => logs.push(String(l.message ?? l)) })
    console.log(`kubernetes: template build, import into the nodes included, ${ms(t0)} ms`)
    assert.ok(logs.some((l) => l.includes('warren-kube-node1') && l.includes('warren-kube-node2')), `the build log does not say the image is on both nodes: ${logs.slice(-5)}`)
    try {
      const times = []
      for (let i = 0; i < 2; i++) {
        const t0 = performance.now()
        const s = await ctx.create(name, { timeoutMs: 120_000 })
        times.push(ms(t0))
        assert.equal((await s.commands.run('cat /tmp/built')).stdout, `${name}\n`)
        assert.equal(await ctx.sdk.Sandbox.kill(s.sandboxId), true)
      }
      console.log(`kubernetes: first create of a freshly built template ${times[0]} ms, the second ${times[1]} ms`)
    } finally {
      await h.server.api(`/templates/${name}`, { method: 'DELETE' }).catch(() => {})
    }
  })

  it('a pod deleted behind the server\'s back: its sandbox is killed at once', async () => {
    const sbx = await ctx.create({ timeoutMs: 120_000 })
    const t0 = performance.now()
    await kubectl('delete', 'pod', (await pods()).get(sbx.sandboxId).metadata.name, '--wait=false')
    await waitFor(async () => !(await listTagged(ctx.sdk, ctx.tag, ['running', 'paused'])).includes(sbx.sandboxId), {
      timeoutMs: 10_000, intervalMs: 100, what: 'the sandbox of the deleted pod to be gone',
    })
    assert.ok(ms(t0) < 10_000)
    assert.equal(await sbx.isRunning(), false)
  })

  it('kill -9 of the control plane: running and frozen sandboxes are adopted, a pod deleted meanwhile is seen, nothing leaks', async () => {
    const a = await ctx.create({ timeoutMs: 600_000 })
    const b = await ctx.create({ timeoutMs: 600_000 })
    const c = await ctx.create({ timeoutMs: 600_000 })
    const mark = uid()
    await a.files.write('/home/user/a.txt', mark)
    const sleeper = await a.commands.run('sleep 3600', { background: true, timeoutMs: 0 })
    assert.equal(await b.pause(), true)

    await h.server.kill9()
    await kubectl('delete', 'pod', `warren-${c.sandboxId}`, '--wait=false')
    await h.server.start()

    // (the suite's earlier sandboxes share the tag)
    const ours = async (state) => (await listTagged(ctx.sdk, ctx.tag, [state])).filter((id) => [a, b, c].some((s) => s.sandboxId === id))
    assert.deepEqual(await ours('running'), [a.sandboxId])
    assert.deepEqual(await ours('paused'), [b.sandboxId])
    assert.equal(await a.files.read('/home/user/a.txt'), mark)
    assert.ok(await alive(a, sleeper.pid), 'the background sleep did not survive the control plane\'s restart')
    const b2 = await ctx.sdk.Sandbox.connect(b.sandboxId)
    assert.equal((await b2.commands.run('echo thawed')).stdout, 'thawed\n')
    for (const s of [a, b]) assert.equal(await ctx.sdk.Sandbox.kill(s.sandboxId), true)
    await waitFor(async () => {
      const left = await pods()
      return ![a, b, c].some((s) => left.has(s.sandboxId))
    }, { timeoutMs: 20_000, intervalMs: 250, what: 'no pod of a killed sandbox' })
  })

  it('kill -9 of the control plane while a sandbox is stopped: it stays paused, and resumes on its node with its files', { skip: ctx.is219 && 'SDK 2.19 has no keepMemory' }, async () => {
    const sbx = await ctx.create({ timeoutMs: 600_000 })
    const mark = uid()
    await sbx.files.write('/home/user/restart.txt', mark)
    const node = (await pods()).get(sbx.sandboxId).spec.nodeName
    assert.equal(await sbx.pause({ keepMemory: false }), true)

    await h.server.kill9()
    await h.server.start()

    const info = await ctx.sdk.Sandbox.getInfo(sbx.sandboxId)
    assert.equal(info.state, 'paused')
    const resumed = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal(await resumed.files.read('/home/user/restart.txt'), mark)
    assert.equal((await pods()).get(sbx.sandboxId).spec.nodeName, node)
    assert.equal(await ctx.sdk.Sandbox.kill(sbx.sandboxId), true)
    await waitFor(async () => !(await pods()).has(sbx.sandboxId), { timeoutMs: 20_000, intervalMs: 250, what: 'its pod to go' })
    await assert.rejects(kubectl('get', 'configmap', `warren-${sbx.sandboxId}`), 'the record of a killed sandbox is left')
  })
})
