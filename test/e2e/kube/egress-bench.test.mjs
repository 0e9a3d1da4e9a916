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
// Then create → first command with and without egress settings. It prints p50/p95.
import { it, after } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Sandbox } from 'e2b'
import { useServer } from '../server/harness.mjs'
import { assert, uid } from '../server/helpers.mjs'
import { outsideHost } from '../server/outside.mjs'

const run = promisify(execFile)
const outside = await outsideHost(1, { documentation: true })
after(() => outside.close())
const chain = process.env.WARREN_E2E_KUBE_CHAIN || 'WARREN-KUBE'
const open = [['-i', 'wkube+', '-o', outside.hostIf, '-j', 'ACCEPT'], ['-i', outside.hostIf, '-o', 'wkube+', '-j', 'ACCEPT']]
for (const r of open) await run('iptables', ['-I', chain, '1', ...r])
after(async () => { for (const r of open) await run('iptables', ['-D', chain, ...r]).catch(() => {}) })
await useServer({})

const CLIENT = String.raw`
const http = require('http')
const [url, n] = [process.argv[2], Number(process.argv[3])]
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
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
  const kinds = { direct: {}, gateway: { allowInternetAccess: false, network: { allowOut: [target] } } }
  const sbx = {}
  try {
    for (const [k, opts] of Object.entries(kinds)) {
      sbx[k] = await Sandbox.create({ metadata: tag, ...opts })
      await sbx[k].files.write('/tmp/client.js', CLIENT)
    }
    const lat = { direct: [], gateway: [] }
    for (let round = 0; round < 5; round++) {
      for (const k of Object.keys(kinds)) {
        const r = await sbx[k].commands.run(`node /tmp/client.js http://${target}:8080/ 100`)
        lat[k].push(...JSON.parse(r.stdout))
      }
    }
    for (const k of Object.keys(kinds)) console.log(`egress-bench: ${k}, kept-alive GET: ${fmt(lat[k])}`)
    console.log(`egress-bench: added by the gateway, p50: ${(pct(lat.gateway, 0.5) - pct(lat.direct, 0.5)).toFixed(2)} ms`)
    const start = { direct: [], gateway: [] }
    for (let i = 0; i < 5; i++) {
      for (const [k, opts] of Object.entries(kinds)) {
        const t = performance.now()
        const s = await Sandbox.create({ metadata: tag, ...opts })
        await s.commands.run('true')
        start[k].push(performance.now() - t)
        await s.kill()
      }
    }
    for (const k of Object.keys(kinds)) console.log(`egress-bench: create → first command, ${k === 'direct' ? 'no settings' : 'egress settings'}: ${fmt(start[k])}`)
    assert.ok(lat.gateway.length === 500)
  } finally {
    await Promise.all(Object.values(sbx).map((s) => s.kill()))
  }
})
