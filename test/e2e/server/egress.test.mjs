// Egress by domain name against a real `warren serve`: a sandbox with denyOut 0.0.0.0/0 and
// domains in allowOut reaches an HTTP server on an outside host (outside.mjs: a network namespace
// routed from the host) by an allowed name (exact and wildcard), and nothing else: names not
// allowed do not resolve, a connection that claims an allowed name is refused unless that name
// resolved to where it goes, a bare address is refused, and PUT network changes what is allowed
// on the running sandbox. No name opens another sandbox: sandboxes reach each other only by an
// address their allowOut names. The sandboxes' DNS is answered by a resolver this test runs on
// 127.0.0.1 (warren serve --egress-dns), which gives the outside host's and a second sandbox's
// addresses: nothing leaves the machine. Rules by address (allowOut, denyOut,
// allowInternetAccess: false) and their update on the running sandbox, refused quickly.
// On the Kubernetes engine (kube-run.sh) the node agents' gateways enforce the same settings
// (they forward to that resolver on the host's loopback, which they share); the outside host's
// addresses are then in 203.0.113.0/24, since sandbox pods are refused 198.18.0.0/15 by their
// own rules, and a neighbour pod is refused whatever a sandbox's allowOut says.
import { it, after } from 'node:test'
import dgram from 'node:dgram'
import { Sandbox } from 'e2b'
import { useServer } from './harness.mjs'
import { assert, startHttpServer, uid } from './helpers.mjs'
import { outsideHost } from './outside.mjs'

/** A UDP resolver on 127.0.0.1 answering A queries from `names` (NXDOMAIN for the rest). */
async function fakeResolver() {
  const names = new Map()
  const asked = []
  const sock = dgram.createSocket('udp4')
  sock.on('message', (msg, from) => {
    if (msg.length < 12) return
    // The question: labels from byte 12, then type and class.
    const labels = []
    let i = 12
    while (i < msg.length && msg[i] !== 0) {
      labels.push(msg.subarray(i + 1, i + 1 + msg[i]).toString())
      i += 1 + msg[i]
    }
    const qtype = msg.readUInt16BE(i + 1)
    const question = msg.subarray(12, i + 5)
    const name = labels.join('.').toLowerCase()
    asked.push(name)
    const ip = names.get(name)
    const answer = ip && qtype === 1
      ? Buffer.concat([Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]), Buffer.from(ip.split('.').map(Number))])
      : Buffer.alloc(0)
    const header = Buffer.alloc(12)
    msg.copy(header, 0, 0, 2)
    header.writeUInt16BE(0x8180 | (ip ? 0 : 3), 2) // response, RD, RA; NXDOMAIN when unknown
    header.writeUInt16BE(1, 4)
    header.writeUInt16BE(answer.length ? 1 : 0, 6)
    sock.send(Buffer.concat([header, question, answer]), from.port, from.address)
  })
  await new Promise((ok) => sock.bind(0, '127.0.0.1', ok))
  return { names, asked, addr: `127.0.0.1:${sock.address().port}`, close: () => sock.close() }
}

const resolver = await fakeResolver()
after(() => resolver.close())
const outside = await outsideHost(2, { documentation: process.env.WARREN_ENGINE === 'kubernetes' })
after(() => outside.close())
await useServer({ private: true, args: ['--egress-dns', resolver.addr] })

/** The sandbox's address on the sandbox network. */
async function addressOf(sbx) {
  return (await sbx.commands.run('hostname -I')).stdout.trim().split(/\s+/)[0]
}

/** What `curl` in sbx makes of url: the HTTP status, or `exit N` when it got none. */
async function curl(sbx, url, ...args) {
  const r = await sbx.commands.run(`curl -sS -m 5 -o /dev/null -w '%{http_code}' ${args.join(' ')} '${url}'`).catch((e) => e)
  return r.exitCode === 0 ? r.stdout : `exit ${r.exitCode}`
}

it('allowOut domains: reachable by an allowed name, and only so', { timeout: 180_000 }, async () => {
  const tag = { e2e: `egress-${uid()}` }
  const [targetIP, otherIP] = outside.ips
  const neighbour = await Sandbox.create({ metadata: tag })
  const closed = await Sandbox.create({
    metadata: tag,
    network: { denyOut: ['0.0.0.0/0'], allowOut: ['allowed.test', '*.wild.test', 'neighbour.test'] },
  })
  try {
    await startHttpServer(neighbour, 8080, '/tmp/www', { 'index.html': 'neighbour' })
    for (const name of ['allowed.test', 'api.wild.test', 'denied.test']) resolver.names.set(name, targetIP)
    resolver.names.set('moved.test', otherIP)
    resolver.names.set('neighbour.test', await addressOf(neighbour))

    // The outside host answers the host at both addresses (the test's control).
    for (const ip of outside.ips) assert.equal(await (await fetch(`http://${ip}:8080/`)).text(), 'outside')

    assert.equal(await curl(closed, 'http://allowed.test:8080/'), '200', 'an allowed name')
    assert.equal(await curl(closed, 'http://API.wild.test:8080/'), '200', 'a name under an allowed wildcard')
    assert.match(await curl(closed, 'http://denied.test:8080/'), /^exit /, 'a name not allowed')
    assert.ok(!resolver.asked.includes('denied.test'), 'a name not allowed is not even asked upstream')
    assert.match(await curl(closed, `http://${targetIP}:8080/`), /^exit /, 'the bare address')
    assert.match(await curl(closed, 'http://denied.test:8080/', '--resolve', `denied.test:8080:${targetIP}`), /^exit /,
      'a name not allowed, at an address an allowed name has')
    assert.match(await curl(closed, `http://${otherIP}:8080/`, '-H', "'Host: allowed.test'"), /^exit /,
      'an allowed name at an address it did not resolve to')
    assert.match(await curl(closed, 'http://neighbour.test:8080/'), /^exit /, 'an allowed name that resolved to a sandbox')
    assert.ok(resolver.asked.includes('neighbour.test'), 'the name of the sandbox was resolved')

    // PUT network replaces the rules on the running sandbox.
    await Sandbox.updateNetwork(closed.sandboxId, { denyOut: ['0.0.0.0/0'], allowOut: ['moved.test'] })
    assert.equal(await curl(closed, 'http://moved.test:8080/'), '200', 'a name allowed by the update')
    assert.match(await curl(closed, 'http://allowed.test:8080/'), /^exit /, 'a name the update took away')
    await Sandbox.updateNetwork(closed.sandboxId, { denyOut: ['0.0.0.0/0'] })
    assert.match(await curl(closed, 'http://moved.test:8080/', '--resolve', `moved.test:8080:${otherIP}`), /^exit /,
      'no domains: every address stays denied')
  } finally {
    await Promise.all([neighbour, closed].map((s) => s.kill()))
  }
})

it('allowOut and denyOut by address, allowInternetAccess: false, updated live, refused at once', { timeout: 120_000 }, async () => {
  const [targetIP, otherIP] = outside.ips
  const sbx = await Sandbox.create({ metadata: { e2e: `egress-${uid()}` }, allowInternetAccess: false, network: { allowOut: [targetIP] } })
  try {
    const refusedAtOnce = async (url, what) => {
      const t0 = Date.now()
      assert.match(await curl(sbx, url), /^exit (?!28)/, `${what}: refused, not timed out`)
      assert.ok(Date.now() - t0 < 3000, `${what}: refused in ${Date.now() - t0} ms`)
    }
    assert.equal(await curl(sbx, `http://${targetIP}:8080/`), '200', 'an address allowOut names')
    await refusedAtOnce(`http://${otherIP}:8080/`, 'no internet access')
    await Sandbox.updateNetwork(sbx.sandboxId, { denyOut: [`${targetIP}/32`] })
    await refusedAtOnce(`http://${targetIP}:8080/`, 'an address denyOut names')
    assert.equal(await curl(sbx, `http://${otherIP}:8080/`), '200', 'internet access given back by the update')
  } finally {
    await sbx.kill()
  }
})

it('denyOut refuses domains with a 400 that says what to do', async () => {
  await assert.rejects(Sandbox.create({ network: { denyOut: ['example.test'] } }),
    (e) => /only IP addresses and CIDRs can be denied/.test(e.message))
})
