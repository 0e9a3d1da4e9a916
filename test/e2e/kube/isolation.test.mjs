// Sandbox pods are isolated from each other and from the cluster (internal/podnet): from a
// sandbox, on the real two-node cluster, every connection to another sandbox's pod (another
// team's, or its own team's, on the other node), to the node agents, the kubelets, the API
// server (its address and the `kubernetes` Service in another namespace), another Service, the
// registry on its node's bridge address and every address of the host the nodes run on (its
// eth0's among them, which no Node object lists) is refused at once, never left to time out.
// Each probe's target really listens (checked from the host, or from inside its sandbox), so a
// refusal is the firewall's and not a closed port's. The server still reaches every agent, and
// a sandbox its own loopback. The pod's one init container isolates it, then installs the
// agent; it is the only container with NET_ADMIN. The same probes run from a gVisor sandbox,
// whose init container programs gVisor's netstack with iptables instead of nftables (with
// NET_RAW beside NET_ADMIN): its sandbox has the runc sandbox's capabilities, its root can
// neither open a raw socket nor change the rules, and it still runs commands, serves a user
// port through the agent and resolves names through its resolver.
//
// Runs only under kube-run.sh (WARREN_ENGINE=kubernetes, WARREN_E2E_KUBECTL_CONFIG).
import { it, before, after } from 'node:test'
import { execFile } from 'node:child_process'
import net from 'node:net'
import { networkInterfaces } from 'node:os'
import { promisify } from 'node:util'
import { Sandbox } from 'e2b'
import { useServer, WarrenServer, WARREN_BIN } from '../server/harness.mjs'
import { assert, startHttpServer, uid, kubectl } from '../server/helpers.mjs'

const srv = await useServer({ private: true, args: ['--warm-pool', '0'] })

// A listener of the test's own on every address of the host the cluster's nodes run on (all of
// them share its network namespace): sandboxes must not reach any, though no Node object lists
// most of them.
const hostListener = net.createServer((c) => c.end())
let hostPort

before(async () => {
  assert.equal(process.env.WARREN_ENGINE, 'kubernetes', 'run this file through test/e2e/kube-run.sh')
  await new Promise((resolve, reject) => hostListener.once('error', reject).listen(0, '::', resolve))
  hostPort = hostListener.address().port
})
after(() => hostListener.close())

/** Whether a TCP connection from this host to host:port is taken within 2 s. */
function answers(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 2000 }, () => { s.destroy(); resolve(true) })
    s.once('timeout', () => { s.destroy(); resolve(false) })
    s.once('error', () => resolve(false))
  })
}

/**
 * The host's addresses (the nodes'), but loopback and link-local: IPv4 ones, and IPv6 ones when
 * the pod has an IPv6 address too (else its kernel has no route to try).
 */
function hostAddresses(v6) {
  return Object.values(networkInterfaces()).flat()
    .filter((a) => !a.internal && (a.family === 'IPv4' || (v6 && !a.address.startsWith('fe80:'))))
    .map((a) => a.address)
}

async function otherTeam(server) {
  const { stdout } = await promisify(execFile)(WARREN_BIN, ['keys', 'create', '--team', `other-${uid()}`, '--state-dir', server.stateDir])
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

/**
 * Makes a prober and six candidates (three of another team, three of its own) on server, and
 * checks that from the prober every connection to the cluster and to the candidates on the
 * other node is refused within a second, and that the pod has the isolating init container
 * with caps, alone with NET_ADMIN. Returns the prober and the pod's spec; cleanup kills them.
 */
async function assertIsolated(server, cleanup, caps) {
  const opts = sdkOpts(server)
  const metadata = { e2e: `isolation-${uid()}` }
  const otherKey = await otherTeam(server)
  const create = async (o) => {
    const s = await Sandbox.create({ ...opts, metadata, timeoutMs: 300_000, ...o })
    cleanup.push(s)
    return s
  }
  const prober = await create({})
  // Candidates of both teams, three of each at a time, until one of each is on the other node:
  // the scheduler spreads pods by preference only, so a round may leave a team on one node.
  let pods, otherTeamSbx, sameTeamSbx
  for (let round = 0; round < 6 && !(otherTeamSbx && sameTeamSbx); round++) {
    const batch = await Promise.all([1, 2, 3].flatMap(() => [create({ apiKey: otherKey }), create({})]))
    pods = new Map((await json('get', 'pods', '-l', `dev.warren.managed=${server.name}`)).items
      .map((p) => [p.metadata.labels['dev.warren.sandbox'], p]))
    const home = pods.get(prober.sandboxId).spec.nodeName
    const away = (other) => batch.find((s, i) => (i % 2 === 0) === other && pods.get(s.sandboxId).spec.nodeName !== home)
    otherTeamSbx ??= away(true)
    sameTeamSbx ??= away(false)
  }
  assert.ok(otherTeamSbx && sameTeamSbx, 'no sandbox of each team on the other node after 6 rounds of 6')
  await startHttpServer(otherTeamSbx, 8000, '/tmp/www', { 'index.html': 'neighbour' })
  await startHttpServer(sameTeamSbx, 8000, '/tmp/www', { 'index.html': 'neighbour' })
  const ipOf = (s) => pods.get(s.sandboxId).status.podIP

  // Targets in sandboxes listen (startHttpServer checks from inside, the server reaches agents);
  // the others are checked from the host below.
  const targets = [
    ['another team\'s sandbox, agent port', 'tcp', ipOf(otherTeamSbx), 49983],
    ['another team\'s sandbox, user port', 'tcp', ipOf(otherTeamSbx), 8000],
    ['a sandbox of its team, user port', 'tcp', ipOf(sameTeamSbx), 8000],
  ]
  const outside = []
  for (const p of (await json('get', 'pods', '-l', 'app.kubernetes.io/name=warren-node')).items) {
    outside.push([`node agent on ${p.spec.nodeName}`, 'tcp', p.status.podIP, 49990])
  }
  const nodes = (await json('get', 'nodes')).items
  const nodeIPs = nodes.map((n) => n.status.addresses.find((a) => a.type === 'InternalIP').address)
  for (const [i, n] of nodes.entries()) {
    outside.push([`kubelet of ${n.metadata.name}`, 'tcp', nodeIPs[i], n.status.daemonEndpoints.kubeletEndpoint.Port])
  }
  // The registry the nodes pull from listens on one node's bridge address.
  const registry = (await Promise.all(nodeIPs.map(async (ip) => (await answers(ip, 15000)) && ip))).find(Boolean)
  assert.ok(registry, `no registry on port 15000 of any node (${nodeIPs})`)
  outside.push(['the registry, on a node\'s bridge address', 'tcp', registry, 15000])
  const api = new URL((await kubectl('config', 'view', '--minify', '-o', 'jsonpath={.clusters[0].cluster.server}')).trim())
  outside.push(['the API server', 'tcp', api.hostname, Number(api.port || 443)])
  const svc = await json('get', 'service', 'kubernetes', '--namespace', 'default')
  outside.push(['the kubernetes Service (namespace default)', 'tcp', svc.spec.clusterIP, 443])
  const buildkitd = await json('get', 'service', 'warren-buildkitd')
  outside.push(['the buildkitd Service', 'tcp', buildkitd.spec.clusterIP, buildkitd.spec.ports[0].port])
  // The host's every address, the nodes' among them: the Node objects list one each.
  const homePod = pods.get(prober.sandboxId)
  const v6 = (homePod.status.podIPs ?? []).some((a) => a.ip.includes(':'))
  const host = hostAddresses(v6)
  assert.ok(nodeIPs.every((ip) => host.includes(ip)), `the nodes (${nodeIPs}) do not run on this host (${host})`)
  // An address of an interface that is down may take nothing, even from the host.
  const live = (await Promise.all(host.map(async (a) => (await answers(a, hostPort)) && a))).filter(Boolean)
  assert.ok(live.some((a) => !nodeIPs.includes(a)), `no address of the host but the nodes' takes connections (${host})`)
  for (const a of live) outside.push([`the host's address ${a}, a port of the test's`, 'tcp', a, hostPort])
  const deaf = (await Promise.all(outside.map(async (t) => !(await answers(t[2], t[3])) && t[0]))).filter(Boolean)
  assert.deepEqual(deaf, [], 'targets that do not take a connection from the host: their probe would prove nothing')
  targets.push(...outside)

  const got = await probe(prober, targets)
  // The firewall's TCP reset: every target listens, so nothing else answers so.
  const open = Object.entries(got).filter(([, [r, ms]]) => r !== 'ECONNREFUSED' || ms > 1000)
  assert.deepEqual(open, [], `reached or not refused at once (outcome, ms): ${JSON.stringify(got)}`)
  console.log(`isolation: ${targets.length} probes refused in ${Object.values(got).reduce((a, [, ms]) => a + ms, 0)} ms in all`)

  // The pod: one init container, isolating it, alone with NET_ADMIN.
  const spec = pods.get(prober.sandboxId).spec
  assert.deepEqual(spec.initContainers.map((c) => c.name), ['warren-init'])
  assert.deepEqual(spec.initContainers[0].securityContext.capabilities.add, caps)
  assert.ok(!spec.containers[0].securityContext.capabilities.add.includes('NET_ADMIN'))
  return { prober, spec }
}

/** The capability sets of a sandbox's root, from /proc: { CapPrm, CapEff, CapBnd }. */
async function capsOf(sbx) {
  const r = await sbx.commands.run('grep -E "^Cap(Prm|Eff|Bnd)" /proc/self/status', { user: 'root' })
  return Object.fromEntries(r.stdout.trim().split('\n').map((l) => l.split(/:\s+/)))
}

/** DNS to the first resolver of sbx's resolv.conf, over UDP and TCP: their outcomes. */
async function dnsOf(sbx) {
  const resolv = (await sbx.files.read('/etc/resolv.conf')).match(/^nameserver\s+(\S+)/m)
  assert.ok(resolv, 'no nameserver in the sandbox\'s resolv.conf')
  const got = await probe(sbx, [['udp', 'udp', resolv[1], 53], ['tcp', 'tcp', resolv[1], 53]])
  return { resolver: resolv[1], udp: got.udp[0], tcp: got.tcp[0] }
}

// What a runc sandbox sees, for the gVisor one to match.
let runcCaps, runcDNS

it('a sandbox reaches no other sandbox, node agent, kubelet, API server, node or cluster service, and is told so at once', { timeout: 300_000 }, async () => {
  const made = []
  try {
    const { prober } = await assertIsolated(srv.server, made, ['NET_ADMIN'])
    runcCaps = await capsOf(prober)
    runcDNS = await dnsOf(prober)
    console.log(`isolation: a runc sandbox's DNS: ${JSON.stringify(runcDNS)}`)
    // What must still work: the server reaches every agent (commands), a sandbox its loopback.
    await startHttpServer(prober, 8000, '/tmp/www', { 'index.html': 'self' })
    const self = await probe(prober, [['loopback', 'tcp', '127.0.0.1', 8000]])
    assert.equal(self.loopback[0], 'connected')
  } finally {
    await Promise.all(made.map((s) => s.kill().catch(() => {})))
  }
})

// Tries, as root in the sandbox, to open a raw socket (which iptables needs) and to replace the
// filter table through any socket; prints each outcome.
const tamper = `
import errno, socket
def attempt(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
print('raw', attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)))
print('raw6', attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)))
# IPT_SO_SET_REPLACE (64) with an empty filter table's header.
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
print('replace', attempt(lambda: s.setsockopt(socket.IPPROTO_IP, 64, b'filter'.ljust(96, b'\\0'))))
`

it('a gVisor sandbox is isolated the same way, cannot undo it, and works', { timeout: 300_000 }, async (t) => {
  const classes = await kubectl('get', 'runtimeclass', '-o', 'name')
  if (!classes.includes('runtimeclass.node.k8s.io/gvisor')) return t.skip('no RuntimeClass gvisor on this cluster')
  const gv = new WarrenServer({ args: ['--runtime', 'gvisor', '--warm-pool', '0'] })
  await gv.start()
  const made = []
  try {
    const { prober, spec } = await assertIsolated(gv, made, ['NET_ADMIN', 'NET_RAW'])
    assert.equal(spec.runtimeClassName, 'gvisor')
    assert.ok(!spec.containers[0].securityContext.capabilities.add.includes('NET_RAW'))
    const caps = await capsOf(prober)
    if (runcCaps) assert.deepEqual(caps, runcCaps, 'a gVisor sandbox\'s root has other capabilities than a runc one\'s')

    await prober.files.write('/tmp/tamper.py', tamper)
    const tampered = await prober.commands.run('python3 /tmp/tamper.py', { user: 'root' })
    assert.deepEqual(tampered.stdout.trim().split('\n'), ['raw EPERM', 'raw6 EPERM', 'replace ENOPROTOOPT'],
      `root in the gVisor sandbox: ${tampered.stdout}`)
    const nodeIP = (await json('get', 'nodes')).items[0].status.addresses.find((a) => a.type === 'InternalIP').address
    const still = await probe(prober, [['a node agent', 'tcp', nodeIP, 49990]])
    assert.equal(still['a node agent'][0], 'ECONNREFUSED')

    // It works: commands (above), a user port through the agent, DNS to its resolver.
    await startHttpServer(prober, 8000, '/tmp/www', { 'index.html': 'gvisor' })
    const res = await fetch(`${gv.url}/index.html`, {
      headers: { 'E2b-Sandbox-Id': prober.sandboxId, 'E2b-Sandbox-Port': '8000' }, signal: AbortSignal.timeout(30_000),
    })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'gvisor')
    // The resolver is in a refused range (the node's, 10.255.255.53 here), so only the rule
    // for it lets DNS out: refused at once without it. This cluster's pods get no answer from
    // it (nothing routes the pod networks back to the host's resolver), runc ones neither.
    const dns = await dnsOf(prober)
    console.log(`isolation: a gVisor sandbox's DNS: ${JSON.stringify(dns)}`)
    const refusals = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'EACCES', 'EPERM'])
    assert.ok(!refusals.has(dns.udp) && !refusals.has(dns.tcp), `DNS to the resolver refused: ${JSON.stringify(dns)}`)
    if (runcDNS) assert.deepEqual(dns, runcDNS, 'DNS differs from a runc sandbox\'s')
  } finally {
    await Promise.all(made.map((s) => s.kill().catch(() => {})))
    await gv.dispose()
  }
})
