// The egress gateway's header rules and SOCKS5 egress proxy against a real `warren serve` with the
// firewall, through the official SDK (and, in test.sh's gVisor suite, with sandboxes under runsc).
// A second sandbox of the team is the HTTP/HTTPS echo target: its certificate is signed by a CA
// this test makes, which the server trusts through --egress-trust-ca and the client sandbox does
// not. The echo target records each request's headers (a secret's as its SHA-256) in its own
// files, and answers only hashes, so the secret's value never travels back into the client.
// On Kubernetes the target is a host outside the cluster (server/outside.mjs: a network namespace at
// a TEST-NET-3 address, whose certificate the host signs), since sandbox pods reach no other pod.
// Checked: a secret-valued header is set over HTTP and HTTPS; curl, Python and Node in the client
// verify the gateway's certificate without a flag; a host without rules is not intercepted (its
// certificate stays the target's, which the client cannot verify); the value is nowhere inside
// the client (environment, files, /proc); a workload token verifies against the server's JWKS with
// the right aud, sub and exp; updateNetwork and Secret.update take effect on the running sandbox;
// a secret destroyed behind a rule fails the request closed (502, nothing sent); a SOCKS5 proxy
// the test runs on 127.0.0.1 sees the CONNECT and the credentials, getInfo shows it without the
// password, and once it is stopped the sandbox's connections fail rather than go direct.
import { it, describe, before, after } from 'node:test'
import { createHash, createPublicKey, verify } from 'node:crypto'
import net from 'node:net'
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Sandbox, Secret } from 'e2b'
import { useServer } from './harness.mjs'
import { assert, uid, waitFor } from './helpers.mjs'
import { makeCA, signLeaf, signLeafInDir } from './test-ca.mjs'
import { outsideHost } from './outside.mjs'

// The target's CA, made before the server starts so that the server can trust it.
const ca = await makeCA('warren e2e egress target CA')
after(() => ca.remove())

const srv = await useServer({ private: true, args: ['--egress-trust-ca', ca.cert] })

const sha256 = (s) => createHash('sha256').update(s).digest('hex')

// The echo target's server: HTTP on 8080, HTTPS on 8443. Each request's headers go to
// /tmp/echo/<n>.json (x-secret hashed); the answer is {n, secret (hash), plain}.
// Its files are under $ECHO_ROOT (default /tmp): echo/ and tls/.
const ECHO = String.raw`
const fs = require('fs'), http = require('http'), https = require('https'), crypto = require('crypto')
const root = process.env.ECHO_ROOT || '/tmp'
let n = 0
function handle(req, res) {
  n++
  const h = { ...req.headers }
  if (h['x-secret'] !== undefined) h['x-secret'] = crypto.createHash('sha256').update(h['x-secret']).digest('hex')
  fs.writeFileSync(root + '/echo/' + n + '.json', JSON.stringify(h))
  fs.writeFileSync(root + '/echo/count', String(n))
  res.setHeader('content-type', 'application/json')
  res.end(JSON.stringify({ n, secret: h['x-secret'] ?? null, plain: h['x-plain'] ?? null }))
}
http.createServer(handle).listen(8080, '0.0.0.0', () =>
  https.createServer({ key: fs.readFileSync(root + '/tls/leaf.key'), cert: fs.readFileSync(root + '/tls/leaf.pem') }, handle)
    .listen(8443, '0.0.0.0', () => console.log('ready')))
`

async function addressOf(sbx) {
  return (await sbx.commands.run('hostname -I')).stdout.trim().split(/\s+/)[0]
}

/** Starts the echo target in sbx, with a certificate for echo.warren.test, other.warren.test and ip. */
async function echoInSandbox() {
  const sbx = await Sandbox.create({ metadata: { e2e: `egress-rules-${uid()}` } })
  const ip = await addressOf(sbx)
  await startEcho(sbx, ip)
  return {
    ip,
    echoed: async (n) => JSON.parse(await sbx.files.read(`/tmp/echo/${n}.json`)),
    count: async () => Number((await sbx.commands.run('cat /tmp/echo/count 2>/dev/null || echo 0')).stdout.trim()),
    close: () => sbx.kill(),
  }
}

/** The echo target on a host outside the cluster, its files in a temp dir of the host's. */
async function echoOutside() {
  const root = await mkdtemp(join(tmpdir(), 'warren-e2e-echo-'))
  await mkdir(join(root, 'echo'))
  await mkdir(join(root, 'tls'))
  const host = await outsideHost(1, {
    documentation: true, server: ECHO, env: { ECHO_ROOT: root },
    prepare: ([ip]) => signLeafInDir(join(root, 'tls'), ca, ['DNS:echo.warren.test', 'DNS:other.warren.test', `IP:${ip}`]),
  })
  return {
    ip: host.ips[0],
    echoed: async (n) => JSON.parse(await readFile(join(root, 'echo', `${n}.json`), 'utf8')),
    count: async () => Number(await readFile(join(root, 'echo', 'count'), 'utf8').catch(() => '0')),
    close: async () => {
      await host.close()
      await rm(root, { recursive: true, force: true })
    },
  }
}

async function startEcho(sbx, ip) {
  await signLeaf(sbx, ca, ['DNS:echo.warren.test', 'DNS:other.warren.test', `IP:${ip}`])
  await sbx.files.write('/tmp/echo/server.js', ECHO)
  await sbx.commands.run('node /tmp/echo/server.js', { background: true, timeoutMs: 0 })
  await waitFor(async () => (await sbx.commands.run('curl -s -o /dev/null http://127.0.0.1:8080/').catch(() => null))?.exitCode === 0,
    { timeoutMs: 20_000, intervalMs: 200, what: 'the echo server' })
  await sbx.commands.run('rm -f /tmp/echo/*.json /tmp/echo/count')
}

/** What a command in sbx printed, or `exit N: stderr` when it failed. */
async function out(sbx, cmd) {
  const r = await sbx.commands.run(cmd, { timeoutMs: 30_000 }).catch((e) => e)
  return r.exitCode === 0 ? r.stdout.trim() : `exit ${r.exitCode}: ${(r.stderr ?? r.message ?? '').trim()}`
}

const clients = {
  curl: (url) => `curl -sS -m 10 ${url}`,
  python: (url) => `python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' ${url}`,
  node: (url) => `node -e 'require("https").get(process.argv[1], (r) => { let b = ""; r.on("data", (d) => b += d); r.on("end", () => console.log(b)) }).on("error", (e) => { console.error(e.message); process.exit(1) })' ${url}`,
}

/** Verifies an ES256 JWT against the server's JWKS and returns its claims. */
async function verifyJWT(jwt) {
  const [h, p, s] = jwt.split('.')
  const header = JSON.parse(Buffer.from(h, 'base64url'))
  const jwks = await (await fetch(`${srv.url}/.well-known/jwks.json`)).json()
  const jwk = jwks.keys.find((k) => k.kid === header.kid)
  assert.ok(jwk, `no key ${header.kid} in the JWKS`)
  assert.equal(header.alg, 'ES256')
  const ok = verify('sha256', Buffer.from(`${h}.${p}`), { key: createPublicKey({ key: jwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'))
  assert.ok(ok, 'the token does not verify against the JWKS')
  return JSON.parse(Buffer.from(p, 'base64url'))
}

describe('egress gateway', { timeout: 300_000 }, () => {
  const made = []
  let target, ip
  before(async () => {
    target = process.env.WARREN_ENGINE === 'kubernetes' ? await echoOutside() : await echoInSandbox()
    ip = target.ip
  })
  after(async () => {
    await Promise.all(made.map((s) => s.kill().catch(() => {})))
    await target?.close().catch(() => {})
  })
  const echoed = (n) => target.echoed(n)
  const count = () => target.count()

  it('sets secret headers over HTTP and HTTPS, verified without flags, the value nowhere inside', async () => {
    const name = `egress-${uid()}`
    const value = `sv-${uid()}-${uid()}`
    await Secret.create(name, value)
    const rule = (plain) => [{ transform: ({ iam }) => ({ headers: { 'X-Secret': Secret.fill(name), 'X-Plain': plain, Authorization: `Bearer ${iam.tokens.t}` } }) }]
    const client = await Sandbox.create({
      metadata: { e2e: 'egress-rules' },
      iam: { tokens: { t: Secret.iamToken({ audience: 'aud-e2e', tokenType: 'JWT-SVID' }) } },
      network: { allowOut: [ip], rules: { 'echo.warren.test': rule('p1') } },
    })
    made.push(client)
    await client.commands.run(`echo '${ip} echo.warren.test other.warren.test' >> /etc/hosts`, { user: 'root' })

    for (const [tool, cmd] of Object.entries(clients)) {
      const got = await out(client, cmd('https://echo.warren.test:8443/'))
      assert.match(got, /^\{/, `${tool} over HTTPS: ${got}`)
      const body = JSON.parse(got)
      assert.equal(body.secret, sha256(value), `${tool}: the secret header`)
      assert.equal(body.plain, 'p1', `${tool}: the plain header`)
    }
    // The workload token the gateway minted for this sandbox.
    const n = await count()
    const auth = (await echoed(n)).authorization
    assert.match(auth, /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/)
    const claims = await verifyJWT(auth.slice('Bearer '.length))
    assert.equal(claims.aud === 'aud-e2e' || claims.aud?.includes?.('aud-e2e'), true, `aud ${claims.aud}`)
    assert.match(claims.sub, new RegExp(`/sandbox/${client.sandboxId}$`))
    assert.ok(claims.exp * 1000 > Date.now() && claims.exp - claims.iat <= 3600, `exp ${claims.exp}, iat ${claims.iat}`)

    // A name without rules is relayed: the certificate is the target's, which the client cannot
    // verify, and with -k the request carries no header of the rules.
    assert.match(await out(client, clients.curl('https://other.warren.test:8443/')), /^exit 60/, 'a host without rules was intercepted')
    assert.equal(JSON.parse(await out(client, 'curl -sSk -m 10 https://other.warren.test:8443/')).secret, null)
    const issuer = await out(client, 'openssl s_client -connect other.warren.test:8443 -servername other.warren.test </dev/null 2>/dev/null | openssl x509 -noout -issuer')
    assert.match(issuer, /warren e2e egress target CA/)

    // The value is nowhere inside: not in any process's environment or command line, not in a
    // readable file. It reaches grep base64-encoded through a pipe, so that no command line or
    // file of this check holds it.
    const b64 = Buffer.from(value).toString('base64')
    const inside = await client.commands.run(`pat() { echo ${b64} | base64 -d; }; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -cF -f <(pat); ` +
      `grep -rlF -D skip --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -f <(pat) / 2>/dev/null | head -3; true`, { user: 'root' })
    assert.equal(inside.stdout.trim(), '0', `the value is inside the sandbox: ${inside.stdout}`)

    // An update on the running sandbox: plain HTTP by the target's address, and the new value of
    // the name's rule on the next HTTPS request.
    await client.updateNetwork({ allowOut: [ip], rules: { 'echo.warren.test': rule('p2'), [ip]: rule('p3') } })
    let body = JSON.parse(await out(client, clients.curl(`http://${ip}:8080/`)))
    assert.deepEqual([body.secret, body.plain], [sha256(value), 'p3'], 'HTTP by address after the update')
    body = JSON.parse(await out(client, clients.curl('https://echo.warren.test:8443/')))
    assert.equal(body.plain, 'p2', 'HTTPS by name after the update')

    // A new version of the secret is what the next request carries.
    const value2 = `sv2-${uid()}`
    await Secret.update(name, value2)
    body = JSON.parse(await out(client, clients.curl('https://echo.warren.test:8443/')))
    assert.equal(body.secret, sha256(value2), 'after Secret.update')

    // Destroyed behind the rule: every request that needs it is refused, and nothing reaches the target.
    await Secret.destroy(name)
    const before = await count()
    for (const url of ['https://echo.warren.test:8443/', `http://${ip}:8080/`]) {
      const r = await out(client, `curl -sS -m 10 -w '\\n%{http_code}' ${url}`)
      assert.match(r, /\n502$/, `${url} with its secret gone: ${r}`)
      assert.match(r, new RegExp(`e2b\\.secrets\\.${name}`), `the refusal names the placeholder: ${r}`)
    }
    assert.equal(await count(), before, 'a request went out without its secret')
  })

  it('tunnels through a SOCKS5 proxy with credentials, and fails closed when it stops', async () => {
    const proxy = await startSOCKS5('e2e-user', 'e2e-pass')
    try {
      const address = `127.0.0.1:${proxy.port}`
      const client = await Sandbox.create({
        metadata: { e2e: 'egress-rules' },
        network: { allowOut: [ip], egressProxy: { address, username: 'e2e-user', password: 'e2e-pass' } },
      })
      made.push(client)
      const body = JSON.parse(await out(client, clients.curl(`http://${ip}:8080/`)))
      assert.equal(body.secret, null)
      assert.deepEqual(proxy.connects, [`e2e-user:e2e-pass@${ip}:8080`])

      const info = await (await fetch(`${srv.url}/sandboxes/${client.sandboxId}`, { headers: { 'X-API-Key': srv.apiKey } })).json()
      assert.deepEqual(info.network?.egressProxy, { address, username: 'e2e-user' }, 'getInfo shows the proxy without its password')

      await proxy.stop()
      const before = await count()
      assert.match(await out(client, clients.curl(`http://${ip}:8080/`)), /^exit /, 'a connection went direct with the proxy down')
      assert.equal(await count(), before)
    } finally {
      await proxy.stop()
    }
  })
})

/**
 * A SOCKS5 server (RFC 1928, RFC 1929 username/password only) on 127.0.0.1 that records each
 * CONNECT as "user:pass@host:port" and relays it.
 */
async function startSOCKS5(user, pass) {
  const connects = []
  const sockets = new Set()
  const server = net.createServer((c) => {
    sockets.add(c)
    c.on('close', () => sockets.delete(c))
    c.on('error', () => {})
    let buf = Buffer.alloc(0)
    let stage = 'greeting', u = '', p = ''
    const need = (n) => buf.length >= n
    c.on('data', function onData(d) {
      buf = Buffer.concat([buf, d])
      for (;;) {
        if (stage === 'greeting') {
          if (!need(2) || !need(2 + buf[1])) return
          const methods = buf.subarray(2, 2 + buf[1])
          buf = buf.subarray(2 + buf[1])
          if (!methods.includes(2)) return c.end(Buffer.from([5, 0xff]))
          c.write(Buffer.from([5, 2]))
          stage = 'auth'
        } else if (stage === 'auth') {
          if (!need(2) || !need(2 + buf[1] + 1) || !need(2 + buf[1] + 1 + buf[2 + buf[1]])) return
          const ul = buf[1], pl = buf[2 + ul]
          u = buf.subarray(2, 2 + ul).toString(), p = buf.subarray(3 + ul, 3 + ul + pl).toString()
          buf = buf.subarray(3 + ul + pl)
          if (u !== user || p !== pass) return c.end(Buffer.from([1, 1]))
          c.write(Buffer.from([1, 0]))
          stage = 'request'
        } else if (stage === 'request') {
          if (!need(10) || buf[3] !== 1) return
          const host = [...buf.subarray(4, 8)].join('.'), port = buf.readUInt16BE(8)
          buf = buf.subarray(10)
          connects.push(`${u}:${p}@${host}:${port}`)
          c.removeListener('data', onData)
          c.pause()
          const up = net.connect(port, host, () => {
            c.write(Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]))
            if (buf.length) up.write(buf)
            c.pipe(up).pipe(c)
            c.resume()
          })
          sockets.add(up)
          up.on('close', () => sockets.delete(up))
          up.on('error', () => c.destroy())
          return
        }
      }
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  let stopped = false
  return {
    port: server.address().port,
    connects,
    stop: async () => {
      if (stopped) return
      stopped = true
      for (const s of sockets) s.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}
