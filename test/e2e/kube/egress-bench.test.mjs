// egress-bench.test.mjs: what the node agent's egress gateway costs a sandbox pod, measured on
// the two-node cluster (not in CI's list: a measurement, run by hand with
// `test/e2e/kube-run.sh kube/egress-bench.test.mjs`). The target is an HTTP server on an outside
// host (outside.mjs, 203.0.113.0/24, routed from the host). Two sandboxes send GETs on one
// kept-alive connection each, interleaved round by round:
//   direct    no egress settings: its packets are forwarded by the host to the target (the
//             test cluster forwards nothing from the pod networks to elsewhere, so the test
//             opens its own target's veth in the cluster's chain for the run, and closes it);
//   gateway   allowInternetAccess false, allowOut the target: its TCP is DNATed to the gateway
//             on its node's address, which checks the rules and relays.
// and GETs over HTTPS (on 8443, its certificate signed by a test CA the server trusts), from
//   direct    as above (the client does not verify the certificate, to compare like with like);
//   secret    a header rule for the target's address setting a header to a team secret: the
//             gateway ends the TLS with Warren's egress CA, sets the header and sends the
//             request on over its own verified, kept-alive TLS.
// Then create → first command with no settings, egress settings, and a secret's header rule.
// It prints p50/p95.
import { it, after } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Sandbox, Secret } from 'e2b'
import { useServer } from '../server/harness.mjs'
import { assert, uid } from '../server/helpers.mjs'
import { outsideHost } from '../server/outside.mjs'
import { makeCA, signLeafInDir } from '../server/test-ca.mjs'

const run = promisify(execFile)
const ca = await makeCA('warren e2e egress bench CA')
const tls = await mkdtemp(join(tmpdir(), 'warren-e2e-bench-'))
after(async () => { await ca.remove(); await rm(tls, { recursive: true, force: true }) })
const SERVER = String.raw`
const fs = require('fs'), dir = process.env.TLS_DIR, ok = (q, s) => s.end('outside')
require('http').createServer(ok).listen(8080, '0.0.0.0', () =>
  require('https').createServer({ key: fs.readFileSync(dir + '/leaf.key'), cert: fs.readFileSync(dir + '/leaf.pem') }, ok)
    .listen(8443, '0.0.0.0', () => console.log('ready')))
`
const outside = await outsideHost(1, { documentation: true, server: SERVER, env: { TLS_DIR: tls },
  prepare: ([ip]) => signLeafInDir(tls, ca, [`IP:${ip}`]) })
after(() => outside.close())
const chain = process.env.WARREN_E2E_KUBE_CHAIN || 'WARREN-KUBE'
const open = [['-i', 'wkube+', '-o', outside.hostIf, '-j', 'ACCEPT'], ['-i', outside.hostIf, '-o', 'wkube+', '-j', 'ACCEPT']]
for (const r of open) await run('iptables', ['-I', chain, '1', ...r])
after(async () => { for (const r of open) await run('iptables', ['-D', chain, ...r]).catch(() => {}) })
await useServer({ args: ['--egress-trust-ca', ca.cert] })

const CLIENT = String.raw`
const [url, n] = [process.argv[2], Number(process.argv[3])]
const http = require(url.startsWith('https:') ? 'https' : 'http')
const agent = new http.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false })
const get = () => new Promise((resolve, reject) => {
  const t = process.hrtime.bigint()
  http.get(url, { agent }, (r) => { r.resume(); r.on('end', () => resolve(Number(process.hrtime.bigint() - t) / 1e6)) }).on('error', reject)
})
;(async () => { await get(); const out = []; for (let i = 0; i < n; i++) out.push(await get()); console.log(JSON.stringify(out)) })()
  .catch((e) => { console.error(e.message); process.exit(1) })
`
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))] }
const fmt = (xs) => `p50 ${pct(xs, 0.5).toFixed(2)} ms, p95 ${pct(xs, 0.95).toFixed(2)} ms (n=${xs.length})`

it('kept-alive HTTP: direct and through the node gateway; create with and without settings', { timeout: 600_000 }, async () => {
  const [target] = outside.ips
  const tag = { e2e: `egress-bench-${uid()}` }
  const secret = `bench-${uid()}`
  await Secret.create(secret, `v-${uid()}`)
  const kinds = {
    direct: {},
    gateway: { allowInternetAccess: false, network: { allowOut: [target] } },
    secret: { network: { rules: { [target]: [{ transform: { headers: { 'X-Secret': Secret.fill(secret) } } }] } } },
  }
  const sbx = {}
  try {
    for (const [k, opts] of Object.entries(kinds)) {
      sbx[k] = await Sandbox.create({ metadata: tag, ...opts })
      await sbx[k].files.write('/tmp/client.js', CLIENT)
    }
    const runs = { 'direct http': ['direct', 'http', 8080], 'gateway http': ['gateway', 'http', 8080], 'direct https': ['direct', 'https', 8443], 'secret https': ['secret', 'https', 8443] }
    const lat = Object.fromEntries(Object.keys(runs).map((k) => [k, []]))
    for (let round = 0; round < 5; round++) {
      for (const [k, [kind, scheme, port]] of Object.entries(runs)) {
        const r = await sbx[kind].commands.run(`node /tmp/client.js ${scheme}://${target}:${port}/ 100`)
        lat[k].push(...JSON.parse(r.stdout))
      }
    }
    for (const k of Object.keys(runs)) console.log(`egress-bench: ${k}, kept-alive GET: ${fmt(lat[k])}`)
    console.log(`egress-bench: added by the gateway, p50: ${(pct(lat['gateway http'], 0.5) - pct(lat['direct http'], 0.5)).toFixed(2)} ms`)
    console.log(`egress-bench: added by a secret's header rule over HTTPS, p50: ${(pct(lat['secret https'], 0.5) - pct(lat['direct https'], 0.5)).toFixed(2)} ms`)
    const start = { direct: [], gateway: [], secret: [] }
    for (let i = 0; i < 5; i++) {
      for (const [k, opts] of Object.entries(kinds)) {
        const t = performance.now()
        const s = await Sandbox.create({ metadata: tag, ...opts })
        await s.commands.run('true')
        start[k].push(performance.now() - t)
        await s.kill()
      }
    }
    const what = { direct: 'no settings', gateway: 'egress settings', secret: "a secret's header rule" }
    for (const k of Object.keys(kinds)) console.log(`egress-bench: create → first command, ${what[k]}: ${fmt(start[k])}`)
    assert.ok(lat['secret https'].length === 500)
  } finally {
    await Promise.all(Object.values(sbx).map((s) => s.kill()))
  }
})
