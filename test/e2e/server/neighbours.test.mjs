// Sandboxes and their neighbours against a real `warren serve` with the firewall, through the
// official SDK: a secure sandbox with allowPublicTraffic false serves on 0.0.0.0:3000; no other
// sandbox reaches it over the sandbox network (past the proxy and its traffic token) unless it is
// of the same team and its allowOut names the target's address itself. Another team's sandbox
// never does, naming it or not; an allow-all, 0.0.0.0/0 or the network's CIDR opens no neighbour.
// The second team's key is made with `warren keys create --team` on the server's state dir.
// On Kubernetes (kube-run.sh) the same pairs open between pods, and again between gVisor pods,
// the named neighbour on the other node than the target's; a kill closes the target's pod to the
// killed one's address.
import { it } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Sandbox } from 'e2b'
import { useServer, WarrenServer, WARREN_BIN } from './harness.mjs'
import { assert, startHttpServer, uid, kubectl } from './helpers.mjs'

const srv = await useServer({ private: true })

/** A key of a new team on the test's server. */
async function otherTeam() {
  const { stdout } = await promisify(execFile)(WARREN_BIN, ['keys', 'create', '--team', `other-${uid()}`, ...srv.server.storeFlags])
  return stdout.trim()
}

/** The sandbox's address on the sandbox network. */
async function addressOf(sbx) {
  return (await sbx.commands.run('hostname -I')).stdout.trim().split(/\s+/)[0]
}

/** What `curl` in sbx makes of url: the HTTP status, or `exit N` when it got none. */
async function curl(sbx, url) {
  const r = await sbx.commands.run(`curl -sS -m 5 -o /dev/null -w '%{http_code}' '${url}'`).catch((e) => e)
  return r.exitCode === 0 ? r.stdout : `exit ${r.exitCode}`
}

/** The host part of url. */
const host = (url) => new URL(url).hostname

/** The lines of iptables-save that name ip, to tell whose rule refused a pair. */
async function rulesNaming(ip) {
  const { stdout } = await promisify(execFile)('iptables-save', []).catch((e) => ({ stdout: String(e) }))
  return stdout.split('\n').filter((l) => l.includes(`${ip}/32`)).join('\n')
}

const kube = process.env.WARREN_ENGINE === 'kubernetes'

/** The pods of server's sandboxes, by sandbox ID. */
async function podsOf(server) {
  const list = JSON.parse(await kubectl('get', 'pods', '-l', `dev.warren.managed=${server.name}`, '-o', 'json'))
  return new Map(list.items.map((p) => [p.metadata.labels['dev.warren.sandbox'], p]))
}

/**
 * On Kubernetes, s when its pod is on another node than target's, else the first of up to five
 * more of make's that is: the scheduler spreads pods by preference only. On Docker, s.
 */
async function onOtherNode(server, target, s, make) {
  for (let i = 0; kube; i++) {
    const pods = await podsOf(server)
    if (pods.get(s.sandboxId).spec.nodeName !== pods.get(target.sandboxId).spec.nodeName) {
      console.log(`neighbours: a neighbour on the other node than the target's after ${i + 1} tries`)
      break
    }
    assert.ok(i < 5, 'no neighbour on the other node than the target\'s after 6 tries')
    s = await make()
  }
  return s
}

/** The peers (--reaches, --reached-by) the last rule change of sandbox id's pod opened. */
async function lastPeers(server, id) {
  const p = (await podsOf(server)).get(id)
  const c = (p.spec.ephemeralContainers ?? []).filter((e) => e.name.startsWith('warren-net-')).at(-1)
  const st = p.status.ephemeralContainerStatuses?.find((e) => e.name === c?.name)?.state?.terminated
  assert.equal(st?.exitCode, 0, `the rule change ${c?.name} of ${id}'s pod ended`)
  const from = c.args.findIndex((a) => a === '--reaches' || a === '--reached-by')
  return from < 0 ? '' : c.args.slice(from).join(' ')
}

/**
 * What the NetworkPolicy of sandbox id's pod lets in (JSON), beside the chart's sandbox policy;
 * undefined without the chart's policy, when none is written.
 */
async function policyIngress(server, id) {
  const list = JSON.parse(await kubectl('get', 'networkpolicies', '-o', 'json')).items
  if (!list.some((p) => p.metadata.name === 'warren-sandboxes')) return undefined
  const name = `warren-peers-${(await podsOf(server)).get(id).metadata.name}`
  return JSON.stringify(list.find((p) => p.metadata.name === name)?.spec.ingress ?? [])
}

/**
 * curl for a request that must get through: up to three tries a second apart, each one that
 * failed reported, since CI once saw a named pair refused once under load (the cause is not
 * known; a pair that never opens still fails).
 */
async function reaches(sbx, url, what) {
  let got
  for (let i = 1; i <= 3; i++) {
    if ((got = await curl(sbx, url)) === '200') return got
    console.error(`neighbours: ${what}: try ${i} got ${got}`)
    if (i === 1) {
      const from = await addressOf(sbx).catch((e) => String(e))
      console.error(`neighbours: the host's rules that name ${host(url)}:\n${await rulesNaming(host(url))}`)
      console.error(`neighbours: ${what} is at ${from}; the host's rules that name it:\n${await rulesNaming(from)}`)
    }
    await new Promise((r) => setTimeout(r, 1000))
  }
  return got
}

it('no sandbox reaches another but one of its team naming its address', { timeout: 240_000 }, async () => {
  const t = Date.now()
  const metadata = { e2e: `neighbours-${uid()}` }
  const otherTeamKey = await otherTeam()
  const target = await Sandbox.create({ metadata, secure: true, network: { allowPublicTraffic: false } })
  const made = [target]
  const create = async (opts) => {
    const s = await Sandbox.create({ metadata, ...opts })
    made.push(s)
    return s
  }
  try {
    await startHttpServer(target, 3000, '/tmp/www', { 'index.html': 'target' })
    const ip = await addressOf(target)
    const url = `http://${ip}:3000/`
    const nameIt = () => create({ network: { allowOut: [ip] } })
    let [named, named32, plain, allowAll, allowAllClosed, wide, otherNamed, otherPlain] = await Promise.all([
      nameIt(),
      create({ network: { allowOut: [`${ip}/32`], denyOut: ['0.0.0.0/0'] } }),
      create({}),
      create({ network: { allowOut: ['0.0.0.0/0'] } }),
      create({ allowInternetAccess: false, network: { allowOut: ['0.0.0.0/0'] } }),
      create({ network: { allowOut: [`${ip}/16`] } }),
      create({ apiKey: otherTeamKey, network: { allowOut: [ip] } }),
      create({ apiKey: otherTeamKey }),
    ])
    console.log(`neighbours: the target and eight others made in ${Date.now() - t} ms`)
    named = await onOtherNode(srv.server, target, named, nameIt)
    assert.equal(await reaches(named, url, 'named'), '200', 'same team, allowOut names the IP')
    assert.equal(await reaches(named32, url, 'named /32'), '200', 'same team, allowOut names the IP as a /32, all else denied')
    for (const [what, sbx] of Object.entries({ plain, allowAll, allowAllClosed, wide, otherNamed, otherPlain })) {
      assert.match(await curl(sbx, url), /^exit /, `${what} reached the target`)
    }
    assert.match(await curl(target, `http://${await addressOf(named)}:3000/`), /^exit /,
      'naming the target opens nothing the other way')

    // Naming the address later, on the running sandbox, opens it; within the team only.
    const t0 = Date.now()
    await Sandbox.updateNetwork(plain.sandboxId, { allowOut: [ip] })
    console.log(`neighbours: updateNetwork naming the target took ${Date.now() - t0} ms`)
    assert.equal(await reaches(plain, url, 'named by PUT'), '200', 'same team, after PUT network names the IP')
    await Sandbox.updateNetwork(otherPlain.sandboxId, { allowOut: [ip] }, { apiKey: otherTeamKey })
    assert.match(await curl(otherPlain, url), /^exit /, 'another team, after PUT network names the IP')
    // Naming it no more closes it again.
    await Sandbox.updateNetwork(named.sandboxId, { allowOut: [] })
    assert.match(await curl(named, url), /^exit /, 'same team, after PUT network names the IP no more')

    // Killing a neighbour closes the target's pod to its address before the kill returns (before
    // its pod is deleted: TestNeighboursCloseBeforeTheDelete), so no pod given it later is a peer.
    if (kube) {
      const plainIP = new RegExp(`\\b${(await addressOf(plain)).replaceAll('.', '\\.')}\\b`)
      assert.match(await lastPeers(srv.server, target.sandboxId), plainIP)
      const lets = await policyIngress(srv.server, target.sandboxId)
      if (lets !== undefined) assert.match(lets, new RegExp(`"${plain.sandboxId}"`), 'the target\'s NetworkPolicy lets the neighbour in')
      const t1 = Date.now()
      await plain.kill()
      console.log(`neighbours: killing a neighbour took ${Date.now() - t1} ms`)
      assert.doesNotMatch(await lastPeers(srv.server, target.sandboxId), plainIP)
      if (lets !== undefined) {
        assert.doesNotMatch(await policyIngress(srv.server, target.sandboxId), new RegExp(`"${plain.sandboxId}"`),
          'the target\'s NetworkPolicy lets a killed neighbour in')
      }
    }
  } finally {
    await Promise.all(made.map((s) => s.kill().catch(() => {})))
  }
})

// On Kubernetes a gVisor pod's rules live in its netstack, changed by an ephemeral container
// as a runc pod's are: the same pairs, both ways, and a runc neighbour of the same team
// reaching a gVisor target.
it('gVisor pods: only a same-team sandbox naming the address reaches it', {
  timeout: 300_000,
  skip: process.env.WARREN_ENGINE !== 'kubernetes' && 'Kubernetes only (on Docker the gVisor engine runs the file above)',
}, async (t) => {
  const classes = await kubectl('get', 'runtimeclass', '-o', 'name')
  if (!classes.includes('runtimeclass.node.k8s.io/gvisor')) return t.skip('no RuntimeClass gvisor on this cluster')
  const gv = new WarrenServer({ args: ['--runtime', 'gvisor'] })
  await gv.start()
  const metadata = { e2e: `neighbours-gvisor-${uid()}` }
  const opts = { apiKey: gv.apiKey, apiUrl: gv.url, sandboxUrl: gv.url, domain: gv.domain, metadata }
  const made = []
  const create = async (o) => {
    const s = await Sandbox.create({ ...opts, ...o })
    made.push(s)
    return s
  }
  try {
    const target = await create({ secure: true, network: { allowPublicTraffic: false } })
    await startHttpServer(target, 3000, '/tmp/www', { 'index.html': 'target' })
    const ip = await addressOf(target)
    const url = `http://${ip}:3000/`
    const { stdout } = await promisify(execFile)(WARREN_BIN, ['keys', 'create', '--team', `other-${uid()}`, ...gv.storeFlags])
    const nameIt = () => create({ network: { allowOut: [ip] } })
    let [named, plain, otherNamed] = await Promise.all([
      nameIt(),
      create({}),
      create({ apiKey: stdout.trim(), network: { allowOut: [ip] } }),
    ])
    named = await onOtherNode(gv, target, named, nameIt)
    assert.equal(await reaches(named, url, 'gVisor named'), '200', 'same team, allowOut names the IP')
    assert.match(await curl(plain, url), /^exit /, 'plain reached the target')
    assert.match(await curl(otherNamed, url), /^exit /, 'another team naming the IP reached the target')
    assert.match(await curl(target, `http://${await addressOf(named)}:3000/`), /^exit /,
      'naming the target opens nothing the other way')
    const t0 = Date.now()
    await Sandbox.updateNetwork(plain.sandboxId, { allowOut: [ip] }, opts)
    console.log(`neighbours: gVisor: updateNetwork naming the target took ${Date.now() - t0} ms`)
    assert.equal(await reaches(plain, url, 'gVisor named by PUT'), '200', 'same team, after PUT network names the IP')
    await Sandbox.updateNetwork(named.sandboxId, { allowOut: [] }, opts)
    assert.match(await curl(named, url), /^exit /, 'same team, after PUT network names the IP no more')
  } finally {
    await Promise.all(made.map((s) => s.kill().catch(() => {})))
    await gv.dispose()
  }
})
