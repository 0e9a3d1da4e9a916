// Warren installed with its Helm chart (scripts/kube.sh deploy --replicas 2: two control-plane
// replicas on the chart's bundled PostgreSQL, one on each node, the node agents, RBAC), driven
// with the official SDK through the exports deploy printed: a sandbox is created, runs a command
// and is killed.
//
// Runs only under test/e2e/kube-helm.sh, which lints and renders the chart, deploys it in a
// namespace of its own (WARREN_NAMESPACE), sets E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN and
// E2B_API_KEY from deploy's last lines, and uninstalls it afterwards.
import { describe, it, before } from 'node:test'
import { assert, waitFor, kubectl, SDKS } from '../server/helpers.mjs'

const [[version, sdk]] = SDKS

before(() => {
  assert.ok(process.env.E2B_API_URL && process.env.E2B_API_KEY && process.env.WARREN_NAMESPACE,
    'run this file through test/e2e/kube-helm.sh')
})

const pods = async (selector) =>
  JSON.parse(await kubectl('get', 'pods', '-l', selector, '-o', 'json')).items.filter((p) => !p.metadata.deletionTimestamp)

describe(`Warren installed by its chart [${version}]`, () => {
  it('runs two replicas on the bundled PostgreSQL, one of them leading', async () => {
    const replicas = await pods('app.kubernetes.io/name=warren')
    assert.equal(replicas.length, 2, replicas.map((p) => p.metadata.name).join(' '))
    const store = replicas[0].spec.containers[0].env.find((e) => e.name === 'WARREN_STORE')
    assert.equal(store?.valueFrom?.secretKeyRef?.name, 'warren-store')
    assert.equal((await pods('app.kubernetes.io/name=warren-postgresql')).length, 1)
    const lease = JSON.parse(await kubectl('get', 'lease', 'warren', '-o', 'json'))
    assert.ok(replicas.some((p) => p.metadata.name === lease.spec.holderIdentity), `the Lease's holder ${lease.spec.holderIdentity} is a replica`)
    // The chart spreads them over the nodes labelled for the control plane (deploy labels all).
    const nodes = JSON.parse(await kubectl('get', 'nodes', '-o', 'json')).items.length
    if (nodes > 1) assert.equal(new Set(replicas.map((p) => p.spec.nodeName)).size, 2, 'both replicas on one node')
  })

  it('creates a sandbox as a pod, runs a command in it, kills it', async () => {
    const sbx = await sdk.Sandbox.create('base', { timeoutMs: 120_000 })
    let killed = false
    try {
      const [pod] = await pods(`dev.warren.sandbox=${sbx.sandboxId}`)
      assert.ok(pod, `a pod for ${sbx.sandboxId} in ${process.env.WARREN_NAMESPACE}`)
      const r = await sbx.commands.run('echo "from the chart $((40+2))"')
      assert.equal(r.stdout, 'from the chart 42\n')
      assert.equal(await sdk.Sandbox.kill(sbx.sandboxId), true)
      killed = true
      await waitFor(async () => (await pods(`dev.warren.sandbox=${sbx.sandboxId}`)).length === 0,
        { timeoutMs: 60_000, what: `the pod of ${sbx.sandboxId} gone` })
    } finally {
      if (!killed) await sdk.Sandbox.kill(sbx.sandboxId).catch(() => {})
    }
  })
})
