// Egress settings on Kubernetes, beyond what server/egress.test.mjs checks on both engines: a
// restricted sandbox's rules are in the table of its own node's agent and in no other node's; a
// UDP packet its settings deny is refused at once; and a node agent that restarts fails closed:
// the table it left stays in the kernel and its gateway, knowing no sandbox yet, refuses the
// sandbox's connections until the control plane sends the node its rules again (here the next
// updateNetwork: the reconcile, which would too, is set an hour off). Header rules and egress
// proxies through the node gateways: server/egress-rules.test.mjs.
//
// Runs only under kube-run.sh (WARREN_ENGINE=kubernetes, WARREN_E2E_KUBECTL_CONFIG), as root.
import { it, before, after } from 'node:test'
import { createHash } from 'node:crypto'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Sandbox } from 'e2b'
import { useServer } from '../server/harness.mjs'
import { assert, uid, kubectl, waitFor } from '../server/helpers.mjs'
import { outsideHost } from '../server/outside.mjs'

const run = promisify(execFile)
const outside = await outsideHost(2, { documentation: true })
after(() => outside.close())
await useServer({ private: true, args: ['--reconcile-interval', '1h'] })

before(() => {
  assert.equal(process.env.WARREN_ENGINE, 'kubernetes', 'run this file through test/e2e/kube-run.sh')
})

/** What `curl` in sbx makes of url: the HTTP status, or `exit N` when it got none. */
async function curl(sbx, url) {
  const r = await sbx.commands.run(`curl -sS -m 5 -o /dev/null -w '%{http_code}' '${url}'`).catch((e) => e)
  return r.exitCode === 0 ? r.stdout : `exit ${r.exitCode}`
}

/** The rules of node's agent, as nft lists its table ('' when it has none). */
async function table(node) {
  const name = `warren-egress-${createHash('sha256').update(node).digest('hex').slice(0, 8)}`
  return (await run('nft', ['list', 'table', 'ip', name]).catch(() => ({ stdout: '' }))).stdout
}

const agentOf = async (node) =>
  JSON.parse(await kubectl('get', 'pods', '-l', 'app.kubernetes.io/name=warren-node', '--field-selector', `spec.nodeName=${node}`, '-o', 'json')).items

it('rules on the sandbox node only; UDP refused at once; a restarted node agent fails closed until resent', { timeout: 240_000 }, async () => {
  const [target, other] = outside.ips
  const sbx = await Sandbox.create({ metadata: { e2e: `kube-egress-${uid()}` }, allowInternetAccess: false, network: { allowOut: [target] } })
  try {
    const pod = JSON.parse(await kubectl('get', 'pods', '-l', `dev.warren.sandbox=${sbx.sandboxId}`, '-o', 'json')).items[0]
    const node = pod.spec.nodeName
    const nodes = JSON.parse(await kubectl('get', 'nodes', '-o', 'json')).items.map((n) => n.metadata.name)
    assert.equal(await curl(sbx, `http://${target}:8080/`), '200', 'an address allowOut names')
    assert.match(await table(node), new RegExp(`ip saddr ${pod.status.podIP.replaceAll('.', '\\.')} `), "the rules are in its node's table")
    for (const n of nodes.filter((n) => n !== node)) assert.ok(!(await table(n)).includes(pod.status.podIP), `no rule for it on ${n}`)

    // UDP to an address the settings deny: refused by the node's table (ICMP), not dropped.
    const udp = await sbx.commands.run(`python3 - <<'EOF'
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.connect(('${other}', 9999))
t = time.monotonic()
try:
    s.send(b'x'); s.recv(16); print('answered')
except socket.timeout:
    print('timeout')
except OSError as e:
    print('refused %d ms' % ((time.monotonic() - t) * 1000))
EOF`)
    assert.match(udp.stdout, /^refused /, `UDP to a denied address: ${udp.stdout}`)

    // The node agent restarts: its table stays, its new gateway knows no sandbox yet.
    const [old] = await agentOf(node)
    await kubectl('delete', 'pod', old.metadata.name, '--wait=true')
    await waitFor(async () => (await agentOf(node)).some((p) => p.metadata.uid !== old.metadata.uid &&
      p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')), { timeoutMs: 90_000, intervalMs: 500, what: 'the new node agent' })
    assert.match(await table(node), new RegExp(pod.status.podIP.replaceAll('.', '\\.')), 'the table outlived its agent')
    const t0 = Date.now()
    assert.match(await curl(sbx, `http://${target}:8080/`), /^exit (?!28)/, 'refused until the rules are sent again')
    assert.ok(Date.now() - t0 < 3000, 'and at once')

    // A change on the node sends it every rule again.
    await Sandbox.updateNetwork(sbx.sandboxId, { allowOut: [target], denyOut: ['0.0.0.0/0'] })
    assert.equal(await curl(sbx, `http://${target}:8080/`), '200', 'allowed again once the node has its rules')
    assert.match(await curl(sbx, `http://${other}:8080/`), /^exit (?!28)/, 'and the rest still refused')
    // Killed: its rules leave its node (and a node with no restricted sandbox has no table).
    await sbx.kill()
    await waitFor(async () => !(await table(node)).includes(pod.status.podIP), { timeoutMs: 10_000, what: "the killed sandbox's rules to go" })
  } finally {
    await sbx.kill().catch(() => {})
  }
})
