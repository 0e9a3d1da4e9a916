// egress-bench.mjs: what the egress gateway costs a sandbox's HTTPS, measured inside sandboxes of
// a real `warren serve` (firewall on, its iptables redirect included).
//
//   node bench/egress/egress-bench.mjs [--runs 200] [--mb 100] [--json] [--serve-arg=... ...]
//
// It starts its own server (test/e2e/server/harness.mjs) trusting a CA it makes
// (--egress-trust-ca), a target sandbox serving HTTPS with a certificate of that CA, and three
// client sandboxes allowed to reach it:
//   direct       no rules: its TCP goes to the target through the bridge, not the gateway;
//   relayed      rules for another host: all its TCP goes through the gateway, which relays
//                this connection byte for byte (no interception);
//   intercepted  a header rule for the target's name: the gateway terminates TLS with Warren's
//                CA, sets the header and opens its own verified TLS to the target.
// In each, a Node script sends --runs GETs one after another, each on a new connection (TCP + TLS
// handshakes + request), then --runs on one kept-alive connection, interleaved with the other
// clients round by round; it prints p50/p95 and the intercepted p50 minus the direct p50. Then a
// --mb MB download (curl to /dev/null) from each, best of 3, in MB/s (10^6 bytes).
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { makeCA, signLeaf } from '../../test/e2e/server/test-ca.mjs'
import { reporter } from '../stats.mjs'

const { values: opt } = parseArgs({
  options: {
    runs: { type: 'string', default: '200' },
    mb: { type: 'string', default: '100' },
    json: { type: 'boolean', default: false },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})
const runs = Number(opt.runs)
const mb = Number(opt.mb)
const say = (m) => { if (!opt.json) console.log(m) }

const ca = await makeCA('warren bench egress CA')
const server = new WarrenServer({ args: ['--egress-trust-ca', ca.cert, ...opt['serve-arg']] })
await server.start()
Object.assign(process.env, server.sdkEnv)
const require = createRequire(new URL('../../test/e2e/package.json', import.meta.url))
const { Sandbox } = await import(require.resolve('e2b'))

// The target: HTTPS on 8443; / answers a few bytes, /big?mb=N answers N MB.
const TARGET = String.raw`
const fs = require('fs'), https = require('https')
const chunk = Buffer.alloc(1 << 20, 120)
https.createServer({ key: fs.readFileSync('/tmp/tls/leaf.key'), cert: fs.readFileSync('/tmp/tls/leaf.pem') }, (req, res) => {
  const m = /^\/big\?mb=(\d+)$/.exec(req.url)
  if (!m) return res.end('ok ' + (req.headers['x-bench'] ?? '-'))
  let left = Number(m[1]) * 1e6
  res.setHeader('content-length', left)
  const more = () => {
    while (left > 0) {
      const n = Math.min(left, chunk.length)
      left -= n
      if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return res.once('drain', more)
    }
    res.end()
  }
  more()
}).listen(8443, '0.0.0.0')
`

// The client's timing loop: GETs on new connections, then on one kept-alive connection.
const CLIENT = String.raw`
const https = require('https'), fs = require('fs')
const [url, n, ca] = [process.argv[2], Number(process.argv[3]), process.argv[4]]
const opts = ca ? { ca: fs.readFileSync(ca) } : {}
const get = (agent) => new Promise((resolve, reject) => {
  const t = process.hrtime.bigint()
  https.get(url, { ...opts, agent }, (r) => {
    let b = ''
    r.on('data', (d) => b += d)
    r.on('end', () => b.startsWith('ok') ? resolve(Number(process.hrtime.bigint() - t) / 1e6) : reject(new Error(b)))
  }).on('error', reject)
})
;(async () => {
  const fresh = [], kept = []
  for (let i = 0; i < n; i++) fresh.push(await get(new https.Agent({ keepAlive: false })))
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 })
  await get(agent)
  for (let i = 0; i < n; i++) kept.push(await get(agent))
  console.log(JSON.stringify({ fresh, kept }))
})().catch((e) => { console.error(e.message); process.exit(1) })
`

const made = []
const results = {}
try {
  const target = await Sandbox.create({ metadata: { bench: 'egress' } })
  made.push(target)
  const ip = (await target.commands.run('hostname -I')).stdout.trim().split(/\s+/)[0]
  await signLeaf(target, ca, ['DNS:target.bench.test'])
  await target.files.write('/tmp/target.js', TARGET)
  await target.commands.run('node /tmp/target.js', { background: true, timeoutMs: 0 })

  const header = [{ transform: { headers: { 'X-Bench': 'set-by-the-gateway' } } }]
  const kinds = {
    direct: { allowOut: [ip] },
    relayed: { allowOut: [ip], rules: { 'elsewhere.bench.test': header } },
    intercepted: { allowOut: [ip], rules: { 'target.bench.test': header } },
  }
  const clients = {}
  for (const [kind, network] of Object.entries(kinds)) {
    const c = await Sandbox.create({ metadata: { bench: 'egress' }, network })
    made.push(c)
    clients[kind] = c
    await c.commands.run(`echo '${ip} target.bench.test' >> /etc/hosts`, { user: 'root' })
    await c.files.write('/tmp/client.js', CLIENT)
    await c.files.write('/tmp/target-ca.pem', await readFile(ca.cert, 'utf8'))
  }
  // The direct and relayed clients see the target's own certificate; the intercepted one sees
  // the gateway's, which its trust store verifies.
  const caOf = (kind) => (kind === 'intercepted' ? '' : '/tmp/target-ca.pem')
  const probe = await clients.intercepted.commands.run(`node /tmp/client.js https://target.bench.test:8443/ 1`)
  if (!probe.stdout.includes('fresh')) throw new Error(`intercepted probe: ${probe.stdout} ${probe.stderr}`)
  const check = await clients.intercepted.commands.run('curl -sS https://target.bench.test:8443/')
  if (check.stdout.trim() !== 'ok set-by-the-gateway') throw new Error(`the gateway did not set the header: ${check.stdout}`)

  // Rounds interleave the clients, so that the machine's other load falls on all of them alike.
  const lat = Object.fromEntries(Object.keys(kinds).map((k) => [k, { fresh: [], kept: [] }]))
  const rounds = 5
  for (let r = 0; r < rounds; r++) {
    for (const kind of Object.keys(kinds)) {
      const res = await clients[kind].commands.run(`node /tmp/client.js https://target.bench.test:8443/ ${Math.ceil(runs / rounds)} ${caOf(kind)}`, { timeoutMs: 300_000 })
      const got = JSON.parse(res.stdout)
      lat[kind].fresh.push(...got.fresh)
      lat[kind].kept.push(...got.kept)
    }
  }
  const report = reporter(results, 36, opt.json)
  say(`HTTPS GET from a sandbox, ${runs} each (Node client in the sandbox, target ${ip}, load ${loadavg().map((l) => l.toFixed(1)).join(' ')}):`)
  for (const kind of Object.keys(kinds)) {
    report(`${kind}_new_connection`, `  ${kind}, new connection`, lat[kind].fresh)
    report(`${kind}_keepalive`, `  ${kind}, kept-alive connection`, lat[kind].kept)
  }
  for (const conn of ['new_connection', 'keepalive']) {
    results[`added_p50_${conn}_ms`] = results[`intercepted_${conn}`].p50 - results[`direct_${conn}`].p50
    say(`  intercepted - direct, p50, ${conn.replace('_', ' ')}: ${results[`added_p50_${conn}_ms`].toFixed(2)} ms`)
  }

  say(`${mb} MB download (curl to /dev/null, best of 3):`)
  for (const kind of Object.keys(kinds)) {
    let best = 0
    for (let i = 0; i < 3; i++) {
      const ca = caOf(kind) ? `--cacert ${caOf(kind)}` : ''
      const res = await clients[kind].commands.run(`curl -sS ${ca} -o /dev/null -w '%{speed_download}' 'https://target.bench.test:8443/big?mb=${mb}'`, { timeoutMs: 600_000 })
      best = Math.max(best, Number(res.stdout) / 1e6)
    }
    results[`${kind}_download_MBps`] = best
    say(`  ${kind.padEnd(12)} ${best.toFixed(0)} MB/s`)
  }
  if (opt.json) console.log(JSON.stringify(results, null, 2))
} finally {
  await Promise.all(made.map((s) => s.kill().catch(() => {})))
  const problems = await server.dispose()
  if (problems.length) console.error(`egress-bench: ${problems.join('; ')}`)
  await ca.remove()
}
