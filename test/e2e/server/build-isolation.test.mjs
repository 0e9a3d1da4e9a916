// Template builds get the isolation sandboxes get, against a real `warren serve` with the
// firewall, through the official SDK: a RUN step reaches no port of the host on any of its
// addresses (a listener this test binds on 0.0.0.0, which the host itself reaches at each) and no
// sandbox, while it still reaches the outside (outside.mjs, a network namespace routed from the
// host standing in for a package mirror), through the engine's NAT and DNS as apt does.
import { it, after } from 'node:test'
import { createServer, connect } from 'node:net'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Template, Sandbox } from 'e2b'
import { useServer } from './harness.mjs'
import { assert, startHttpServer, uid } from './helpers.mjs'
import { outsideHost } from './outside.mjs'

await useServer()
// On buildkitd (kube-run.sh, WARREN_E2E_BUILDKIT=1) the steps are refused 198.18.0.0/15 with the
// other special ranges: the outside host stands in TEST-NET-3 there.
const outside = await outsideHost(1, { documentation: process.env.WARREN_E2E_BUILDKIT === '1' })
after(() => outside.close())
// The gVisor test engine (scripts/setup-gvisor.sh) forwards nothing out of its bridges: there no
// build or sandbox reaches the outside, and only the refusals are checked.
// On buildkitd (kube-run.sh) a step's connection to the outside host times out on the test
// cluster (its NAT works in a container of the same image: an open issue), so only the refusals
// are checked there.
const forwards = !process.env.DOCKER_HOST?.includes('/run/warren-gvisor/') && process.env.WARREN_E2E_BUILDKIT !== '1'

/** A TCP listener on every host address, counting the connections it accepts. */
async function hostListener() {
  const l = { accepted: 0 }
  l.server = createServer((c) => {
    l.accepted++
    c.destroy()
  })
  await new Promise((ok) => l.server.listen(0, '0.0.0.0', ok))
  l.port = l.server.address().port
  return l
}

const canConnect = (host, port) => new Promise((ok) => {
  const c = connect({ host, port, timeout: 2000 }, () => { c.destroy(); ok(true) })
  c.on('error', () => ok(false))
  c.on('timeout', () => { c.destroy(); ok(false) })
})

it('a build step reaches no host address and no sandbox, and still the outside', { timeout: 300_000 }, async () => {
  const l = await hostListener()
  const sbx = await Sandbox.create({ metadata: { e2e: `build-isolation-${uid()}` } })
  const name = `e2e-build-isolation-${uid()}`
  try {
    await startHttpServer(sbx, 3000, '/tmp/www', { 'index.html': 'sandbox' })
    const sandboxIP = (await sbx.commands.run('hostname -I')).stdout.trim().split(/\s+/)[0]
    // Every IPv4 address of the host but loopback, of interfaces up or down (the builds' bridge
    // is down until a build runs).
    const { stdout } = await promisify(execFile)('ip', ['-4', '-o', 'addr', 'show'])
    const hostIPs = stdout.split('\n').map((l) => l.split(/\s+/)[3]?.split('/')[0]).filter((a) => a && !a.startsWith('127.'))
      // On buildkitd the outside host's own side of its link (TEST-NET-3, an address of this host
      // that stands in for the internet) is reachable, as a node's public address would be: the
      // pod refuses only the networks it is told (deploy/kubernetes/buildkitd.yaml, REFUSE).
      .filter((a) => !(process.env.WARREN_E2E_BUILDKIT === '1' && a === outside.gateway))
    assert.ok(hostIPs.length >= 3, `host addresses: ${hostIPs}`)
    for (const ip of hostIPs) assert.ok(await canConnect(ip, l.port), `control: the host reaches its listener at ${ip}`)
    l.accepted = 0

    const targets = [...hostIPs.map((ip) => [ip, l.port]), [sandboxIP, 3000]]
    const probe = targets.map(([ip, port]) =>
      `if timeout 3 bash -c 'exec 3<>/dev/tcp/${ip}/${port}'; then echo "REACHED ${ip}:${port}"; else echo "refused ${ip}:${port}"; fi`).join('; ')
    let t = Template().fromImage('warren/base').runCmd(probe)
    if (forwards) t = t.runCmd(`echo "mirror says $(curl -sS -m 5 http://${outside.ips[0]}:8080/)"`)
    const logs = []
    await Template.build(t, name, { onBuildLogs: (e) => logs.push(e.message) })
    const text = logs.join('\n')
    for (const [ip, port] of targets) assert.match(text, new RegExp(`refused ${ip}:${port}`), `no result for ${ip}:${port}:\n${text}`)
    assert.doesNotMatch(text, /^REACHED/m, 'a build step reached the host or a sandbox')
    assert.equal(l.accepted, 0, 'the host listener accepted a connection from the build')
    if (forwards) assert.match(text, /mirror says outside/, 'the build did not reach the outside')
  } finally {
    l.server.close()
    await sbx.kill().catch(() => {})
    await fetch(`${process.env.E2B_API_URL}/templates/${name}`, { method: 'DELETE', headers: { 'X-API-Key': process.env.E2B_API_KEY } }).catch(() => {})
  }
})
