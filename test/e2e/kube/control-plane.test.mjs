// Warren's control plane inside the cluster (deploy/kubernetes/control-plane.yaml), reached
// through its Service: the official SDKs create a sandbox, run a command, write and read a
// file, and kill it; the control plane's pod is deleted and recreated, and its state (on the
// node's hostPath) brings the sandbox back. Its server reaches the API server with its
// in-cluster config only, so as its service account.
//
// Runs only under test/e2e/kube-control-plane.sh (a step of kube-run.sh), which applies the
// Deployment and sets E2B_API_URL/E2B_SANDBOX_URL to the Service, E2B_API_KEY, and
// WARREN_E2E_CP_INSTANCE (the server's --instance, the value of its pods' managed label).
import { describe, it, before } from 'node:test'
import { assert, describeEachSdk, waitFor, kubectl, listTagged, uid, SDKS } from '../server/helpers.mjs'

const instance = process.env.WARREN_E2E_CP_INSTANCE
const api = process.env.E2B_API_URL

before(() => {
  assert.ok(instance && api, 'run this file through test/e2e/kube-control-plane.sh')
})

/** The pod of sandbox id, or undefined. */
const podOf = async (id) => {
  const list = JSON.parse(await kubectl('get', 'pods', '-l', `dev.warren.managed=${instance},dev.warren.sandbox=${id}`, '-o', 'json'))
  return list.items[0]
}
const controlPlanePod = async () => {
  const list = JSON.parse(await kubectl('get', 'pods', '-l', 'app.kubernetes.io/name=warren', '-o', 'json'))
  return list.items.filter((p) => !p.metadata.deletionTimestamp)
}
const healthy = async () => (await fetch(`${api}/health`, { signal: AbortSignal.timeout(2000) }).catch(() => null))?.status === 204

describe('the control plane in the cluster', () => {
  it('runs as its service account, with no kubeconfig and no Docker socket, building on buildkitd', async () => {
    const pods = await controlPlanePod()
    assert.equal(pods.length, 1)
    const p = pods[0]
    assert.equal(p.spec.serviceAccountName, 'warren-control-plane')
    const c = p.spec.containers[0]
    assert.ok(!c.command.includes('--kubeconfig') && !c.env?.some((e) => e.name === 'WARREN_KUBECONFIG'), c.command.join(' '))
    const node = JSON.parse(await kubectl('get', 'node', p.spec.nodeName, '-o', 'json'))
    assert.equal(node.metadata.labels['warren.dev/control-plane'], 'true')
    // Its only host mount is its state.
    const hostPaths = p.spec.volumes.filter((v) => v.hostPath).map((v) => v.hostPath.path)
    assert.equal(hostPaths.length, 1, `host mounts: ${hostPaths}`)
    assert.ok(!hostPaths.some((h) => h.includes('docker')), `host mounts: ${hostPaths}`)
    assert.ok(c.env.some((e) => e.name === 'WARREN_BUILDKIT'), 'no buildkitd configured')
  })
})

describeEachSdk('through the Service of the in-cluster control plane', (ctx) => {
  it('creates a sandbox as a pod, runs a command, writes and reads a file, kills it', async () => {
    const sbx = await ctx.create({ timeoutMs: 120_000 })
    const pod = await podOf(sbx.sandboxId)
    assert.ok(pod, `a pod labelled dev.warren.managed=${instance} for ${sbx.sandboxId}`)
    const r = await sbx.commands.run('echo "in-cluster $((40+2))"; hostname')
    assert.equal(r.stdout, `in-cluster 42\n${sbx.sandboxId}\n`)
    await sbx.files.write('/home/user/cp.txt', `written through ${api}`)
    assert.equal(await sbx.files.read('/home/user/cp.txt'), `written through ${api}`)
    assert.equal(await ctx.sdk.Sandbox.kill(sbx.sandboxId), true)
    await waitFor(async () => !(await podOf(sbx.sandboxId)), { timeoutMs: 60_000, what: `the pod of ${sbx.sandboxId} gone` })
  })
})

describe('the control plane restarted', () => {
  const [[, sdk]] = SDKS
  it('keeps its sandboxes: a recreated pod adopts them from its state', async () => {
    const tag = `cp-${uid()}`
    const sbx = await sdk.Sandbox.create('base', { timeoutMs: 300_000, metadata: { e2e: tag } })
    try {
      await sbx.files.write('/home/user/before.txt', 'before the restart')
      const [old] = await controlPlanePod()
      await kubectl('delete', 'pod', old.metadata.name, '--wait=true', '--timeout=90s')
      await kubectl('rollout', 'status', 'deployment/warren', '--timeout=180s')
      const [now] = await controlPlanePod()
      assert.notEqual(now.metadata.name, old.metadata.name)
      assert.equal(now.spec.nodeName, old.spec.nodeName)
      // kube-proxy follows the Service's new endpoint.
      await waitFor(healthy, { timeoutMs: 30_000, what: 'the Service answering again' })
      const again = await sdk.Sandbox.connect(sbx.sandboxId)
      assert.equal(await again.files.read('/home/user/before.txt'), 'before the restart')
      assert.equal((await again.commands.run('echo after')).stdout, 'after\n')
      assert.deepEqual(await listTagged(sdk, tag), [sbx.sandboxId])
    } finally {
      await sdk.Sandbox.kill(sbx.sandboxId)
    }
    await waitFor(async () => !(await podOf(sbx.sandboxId)), { timeoutMs: 60_000, what: `the pod of ${sbx.sandboxId} gone` })
  })
})
