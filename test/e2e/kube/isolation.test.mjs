// Sandbox pods are isolated from each other and from the cluster (internal/podnet): from a
// sandbox, on the real two-node cluster, every connection to another sandbox's pod (another
// team's, or its own team's, on the other node), to the node agents, the kubelets, the API
// server (its address and the `kubernetes` Service in another namespace), the nodes' bridge
// addresses (the registry's port among them), the Service range's DNS and the metadata
// address is refused at once, never left to time out; the server still reaches every agent,
// and a sandbox its own loopback. The pod's one init container isolates it, then installs the
// agent; it is the only container with NET_ADMIN. A gVisor pod, whose init container runs on
// gVisor's kernel (no nftables), fails closed: it never starts.
//
// Runs only under kube-run.sh (WARREN_ENGINE=kubernetes, WARREN_E2E_KUBECTL_CONFIG).
import { it, before } from 'node:test'
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { promisify } from 'node:util'
import { Sandbox } from 'e2b'
import { useServer, WarrenServer, WARREN_BIN } from '../server/harness.mjs'
import { assert, startHttpServer, uid, kubectl, waitFor } from '../server/helpers.mjs'

const srv = await useServer({ private: true, args: ['--warm-pool', '0'] })

before(() => {
  assert.equal(process.env.WARREN_ENGINE, 'kubernetes', 'run this file through test/e2e/kube-run.sh')
})

async function otherTeam() {
  const { stdout } = await promisify(execFile)(WARREN_BIN, ['keys', 'create', '--team', `other-${uid()}`, '--state-dir', srv.server.stateDir])
  return stdout.trim()
}

/** The SDK's options for a server other than the file's own. */
const sdkOpts = (server) => ({ apiKey: server.apiKey, apiUrl: server.url, sandboxUrl: server.url, domain: server.domain })

const json = async (...args) => JSON.parse(await kubectl(...args, '-o', 'json'))

/**
 * Connects from sbx to each [name, proto, host, port] (a DNS query for UDP), 3 s at most each,
 * and returns name → [outcome, ms]: connected or answered, timeout, or the errno's name.
 */
async function probe(sbx, targets) {
  const script = `
import errno, json, socket, sys, time
out = {}
for name, proto, host, port in json.load(open(sys.argv[1])):
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    t = time.monotonic()
    try:
        s = socket.socket(fam, socket.SOCK_STREAM if proto == 'tcp' else socket.SOCK_DGRAM)
        s.settimeout(3)
        s.connect((host, port))
        if proto == 'udp':
            s.send(bytes.fromhex('abcd010000010000000000000777617272656e0474657374000001000100'))
            s.recv(512)
            r = 'answered'
        else:
            r = 'connected'
    except socket.timeout:
        r = 'timeout'
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    out[name] = [r, round((time.monotonic() - t) * 1000)]
print(json.dumps(out))
`
  await sbx.files.write('/tmp/probe.py', script)
  await sbx.files.write('/tmp/targets.json', JSON.stringify(targets))
  const r = await sbx.commands.run('python3 /tmp/probe.py /tmp/targets.json', { timeoutMs: 120_000 })
  return JSON.parse(r.stdout)
}

it('a sandbox reaches no other sandbox, node agent, kubelet, API server, node or cluster service, and is told so at once', { timeout: 300_000 }, async () => {
  const metadata = { e2e: `isolation-${uid()}` }
  const otherKey = await otherTeam()
  const made = []
  const create = async (opts) => {
    const s = await Sandbox.create({ metadata, timeoutMs: 300_000, ...opts })
    made.push(s)
    return s
  }
  try {
    const prober = await create({})
    // Candidates of both teams; one of each on the other node is kept.
    const others = await Promise.all([1, 2, 3].flatMap(() => [create({ apiKey: otherKey }), create({})]))
    const pods = new Map((await json('get', 'pods', '-l', `dev.warren.managed=${srv.server.name}`)).items
      .map((p) => [p.metadata.labels['dev.warren.sandbox'], p]))
    const home = pods.get(prober.sandboxId).spec.nodeName
    const away = (team) => others.find((s, i) => (i % 2 === 0) === (team === 'other') && pods.get(s.sandboxId).spec.nodeName !== home)
    const [otherTeamSbx, sameTeamSbx] = [away('other'), away('same')]
    assert.ok(otherTeamSbx && sameTeamSbx, 'no sandbox of each team on the other node')
    await startHttpServer(otherTeamSbx, 8000, '/tmp/www', { 'index.html': 'neighbour' })
    await startHttpServer(sameTeamSbx, 8000, '/tmp/www', { 'index.html': 'neighbour' })
    const ipOf = (s) => pods.get(s.sandboxId).status.podIP

    const targets = [
      ['another team\'s sandbox, agent port', 'tcp', ipOf(otherTeamSbx), 49983],
      ['another team\'s sandbox, user port', 'tcp', ipOf(otherTeamSbx), 8000],
      ['a sandbox of its team, user port', 'tcp', ipOf(sameTeamSbx), 8000],
      ['the metadata address', 'tcp', '169.254.169.254', 80],
      ['the Service range\'s DNS', 'udp', '10.247.0.10', 53],
    ]
    for (const p of (await json('get', 'pods', '-l', 'app.kubernetes.io/name=warren-node')).items) {
      targets.push([`node agent on ${p.spec.nodeName}`, 'tcp', p.status.podIP, 49990])
    }
    const nodes = (await json('get', 'nodes')).items
    for (const n of nodes) {
      const ip = n.status.addresses.find((a) => a.type === 'InternalIP').address
      targets.push([`kubelet of ${n.metadata.name}`, 'tcp', ip, n.status.daemonEndpoints.kubeletEndpoint.Port])
      targets.push([`kubelet port 10250 of ${n.metadata.name}`, 'tcp', ip, 10250])
      targets.push([`${n.metadata.name}'s bridge address, the registry's port`, 'tcp', ip, 15000])
    }
    const api = new URL((await kubectl('config', 'view', '--minify', '-o', 'jsonpath={.clusters[0].cluster.server}')).trim())
    targets.push(['the API server', 'tcp', api.hostname, Number(api.port || 443)])
    const svc = await json('get', 'service', 'kubernetes', '--namespace', 'default')
    targets.push(['the kubernetes Service (namespace default)', 'tcp', svc.spec.clusterIP, 443])

    const got = await probe(prober, targets)
    // A TCP reset; ICMP prohibited; a datagram dropped on its way out (the send fails).
    const quick = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'EACCES', 'EPERM'])
    const open = Object.entries(got).filter(([, [r, ms]]) => !quick.has(r) || ms > 1000)
    assert.deepEqual(open, [], `reached or not refused at once (outcome, ms): ${JSON.stringify(got)}`)
    console.log(`isolation: ${targets.length} probes refused in ${Object.values(got).reduce((a, [, ms]) => a + ms, 0)} ms in all`)

    // The pod: one init container, isolating it, alone with NET_ADMIN.
    const spec = pods.get(prober.sandboxId).spec
    assert.deepEqual(spec.initContainers.map((c) => c.name), ['warren-init'])
    assert.deepEqual(spec.initContainers[0].securityContext.capabilities.add, ['NET_ADMIN'])
    assert.ok(!spec.containers[0].securityContext.capabilities.add.includes('NET_ADMIN'))

    // What must still work: the server reaches every agent (commands), a sandbox its loopback.
    await startHttpServer(prober, 8000, '/tmp/www', { 'index.html': 'self' })
    const self = await probe(prober, [['loopback', 'tcp', '127.0.0.1', 8000]])
    assert.equal(self.loopback[0], 'connected')
  } finally {
    await Promise.all(made.map((s) => s.kill().catch(() => {})))
  }
})

it('a gVisor sandbox, whose pod cannot be isolated yet, is refused and leaves no pod (fail closed)', { timeout: 180_000 }, async (t) => {
  const classes = await kubectl('get', 'runtimeclass', '-o', 'name')
  if (!classes.includes('runtimeclass.node.k8s.io/gvisor')) return t.skip('no RuntimeClass gvisor on this cluster')
  const gv = new WarrenServer({ args: ['--runtime', 'gvisor', '--warm-pool', '0'] })
  await gv.start()
  try {
    const err = await Sandbox.create({ ...sdkOpts(gv), timeoutMs: 60_000 }).then((s) => s.kill().then(() => null), (e) => e)
    assert.ok(err, 'a gVisor sandbox was created: its pod is not isolated')
    const log = await readFile(gv.logPath, 'utf8')
    assert.match(log, /no nftables/, 'the server\'s log names why')
    // (The server deletes the pod; the cluster lists it as terminating for a while.)
    await waitFor(async () => (await kubectl('get', 'pods', '-l', `dev.warren.managed=${gv.name}`, '-o', 'name')).trim() === '',
      { timeoutMs: 90_000, intervalMs: 500, what: 'the refused sandbox\'s pod to be deleted' })
  } finally {
    await gv.dispose()
  }
})
