// The data plane of a real `warren serve`: commands, files, watch and pty through the proxy
// (the SDK with E2B_SANDBOX_URL), getHost with an HTTP server inside reached by routing headers
// and by Host, 502s, the traffic token, signed file URLs, getMetrics, and a sandbox killed
// while a command streams.
import { it, before } from 'node:test'
import http from 'node:http'
import { createHash, randomBytes } from 'node:crypto'
import { useServer } from './harness.mjs'
import {
  assert, describeEachSdk, rejectsWith, waitFor, sleep, uid, proxyFetch, hostRequest, startHttpServer, agentAddr,
} from './helpers.mjs'

await useServer()

const enc = (s) => new TextEncoder().encode(s)

// A WebSocket echo server for inside a sandbox, on Python's standard library only: it greets
// each client with "hello", then answers every text message with "echo:" + the message.
const WS_ECHO_SERVER = `import base64, hashlib, socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1])))
s.listen(8)
def recvn(c, n):
    b = b''
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b
def send(c, op, data):
    n = len(data)
    h = bytes([0x80 | op]) + (bytes([n]) if n < 126 else bytes([126]) + struct.pack('>H', n))
    c.sendall(h + data)
while True:
    c, _ = s.accept()
    req = b''
    while b'\\r\\n\\r\\n' not in req:
        x = c.recv(4096)
        if not x:
            break
        req += x
    if b'\\r\\n\\r\\n' not in req:
        c.close()
        continue
    key = [l.split(b':', 1)[1].strip() for l in req.split(b'\\r\\n') if l.lower().startswith(b'sec-websocket-key:')][0]
    accept = base64.b64encode(hashlib.sha1(key + b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest())
    c.sendall(b'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + b'\\r\\n\\r\\n')
    send(c, 1, b'hello')
    try:
        while True:
            b0, b1 = recvn(c, 2)
            op, n = b0 & 15, b1 & 127
            if n == 126:
                n = struct.unpack('>H', recvn(c, 2))[0]
            mask = recvn(c, 4) if b1 & 128 else bytes(4)
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(recvn(c, n)))
            if op == 8:
                send(c, 8, data)
                break
            send(c, 1, b'echo:' + data)
    except EOFError:
        pass
    c.close()
`

// wsConnect opens a WebSocket to port of a sandbox through the proxy (routing headers), checks
// the server's handshake answer, and returns { next(): Promise<string>, send(text), close() }.
async function wsConnect(sandboxId, port) {
  const key = randomBytes(16).toString('base64')
  const { res, socket, head } = await new Promise((resolve, reject) => {
    const req = http.request(`${process.env.E2B_SANDBOX_URL}/`, {
      headers: {
        Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Version': '13',
        'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': String(port),
      },
    })
    req.setTimeout(10_000, () => req.destroy(new Error('no answer to the upgrade within 10 s')))
    req.on('upgrade', (res, socket, head) => resolve({ res, socket, head }))
    req.on('response', (res) => reject(new Error(`no upgrade: HTTP ${res.statusCode}`)))
    req.on('error', reject)
    req.end()
  })
  assert.equal(res.headers['sec-websocket-accept'], createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64'))
  let buf = head
  const messages = []
  const waiting = []
  const drain = () => {
    for (;;) {
      if (buf.length < 2) return
      let n = buf[1] & 127
      let off = 2
      if (n === 126) {
        if (buf.length < 4) return
        n = buf.readUInt16BE(2)
        off = 4
      }
      if (buf.length < off + n) return
      messages.push(buf.subarray(off, off + n).toString())
      buf = buf.subarray(off + n)
      while (waiting.length && messages.length) waiting.shift()(messages.shift())
    }
  }
  socket.on('data', (d) => {
    buf = Buffer.concat([buf, d])
    drain()
  })
  drain()
  return {
    next: () => new Promise((resolve, reject) => {
      if (messages.length) return resolve(messages.shift())
      const timer = setTimeout(() => reject(new Error('no WebSocket message within 10 s')), 10_000)
      waiting.push((m) => { clearTimeout(timer); resolve(m) })
    }),
    send: (text) => {
      const data = Buffer.from(text)
      const mask = randomBytes(4)
      const len = data.length < 126 ? Buffer.from([0x80 | data.length]) : Buffer.from([0x80 | 126, data.length >> 8, data.length & 255])
      socket.write(Buffer.concat([Buffer.from([0x81]), len, mask, data.map((b, i) => b ^ mask[i % 4])]))
    },
    close: () => socket.destroy(),
  }
}

// An HTTPS file server for inside a sandbox (cert.pem and key.pem in its directory), on Python's
// standard library.
const HTTPS_SERVER = `import http.server, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain('cert.pem', 'key.pem')
s = http.server.HTTPServer(('0.0.0.0', int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
`

describeEachSdk('data plane through the proxy', (ctx) => {
  let sbx
  before(async () => {
    sbx = await ctx.create({ timeoutMs: 600_000 })
  })

  it('commands: run (stdout, stderr, exit code), non-zero exit, background + kill, list', async () => {
    const r = await sbx.commands.run('echo out; echo err >&2')
    assert.deepEqual([r.stdout, r.stderr, r.exitCode], ['out\n', 'err\n', 0])
    const e = await rejectsWith(sbx.commands.run('echo bad; exit 3'), ctx.sdk.CommandExitError)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'bad\n')
    const out = []
    const bg = await sbx.commands.run('for i in 1 2 3; do echo tick $i; sleep 0.2; done; sleep 3600', {
      background: true, timeoutMs: 0, onStdout: (d) => out.push(d),
    })
    await waitFor(() => out.join('').includes('tick 3'), { timeoutMs: 10_000, what: 'streamed output' })
    assert.ok((await sbx.commands.list()).some((p) => p.pid === bg.pid), 'background command listed')
    assert.equal(await bg.kill(), true)
    await rejectsWith(bg.wait(), ctx.sdk.CommandExitError)
    assert.equal((await sbx.commands.run(`kill -0 ${bg.pid} 2>/dev/null || echo gone`)).stdout, 'gone\n')
    assert.equal(await sbx.commands.kill(bg.pid), false)
  })

  it('files: write, read (text, bytes), list, exists, remove; big file round trip', async () => {
    const dir = `/home/user/files-${uid()}`
    const info = await sbx.files.write(`${dir}/a.txt`, 'alpha')
    assert.equal(info.path, `${dir}/a.txt`)
    assert.equal(await sbx.files.read(`${dir}/a.txt`), 'alpha')
    const big = Buffer.alloc(3 << 20)
    for (let i = 0; i < big.length; i++) big[i] = (i * 7) % 251
    await sbx.files.write(`${dir}/big.bin`, big.buffer.slice(big.byteOffset, big.byteOffset + big.length))
    const back = Buffer.from(await sbx.files.read(`${dir}/big.bin`, { format: 'bytes' }))
    assert.ok(back.equals(big), 'big file differs after the round trip')
    const names = (await sbx.files.list(dir)).map((e) => e.name).sort()
    assert.deepEqual(names, ['a.txt', 'big.bin'])
    assert.equal(await sbx.files.exists(`${dir}/a.txt`), true)
    await sbx.files.remove(`${dir}/a.txt`)
    assert.equal(await sbx.files.exists(`${dir}/a.txt`), false)
    await rejectsWith(sbx.files.read(`${dir}/a.txt`), ctx.sdk.FileNotFoundError)
  })

  it('files.watchDir reports a file written by a command', async () => {
    const dir = `/home/user/watch-${uid()}`
    await sbx.files.makeDir(dir)
    const events = []
    const h = await sbx.files.watchDir(dir, (e) => events.push(e))
    try {
      await sbx.commands.run(`echo hi > ${dir}/new.txt`)
      await waitFor(() => events.some((e) => e.name === 'new.txt'), { timeoutMs: 10_000, what: 'a watch event for new.txt' })
    } finally {
      await h.stop()
    }
  })

  it('pty: an interactive shell echoes input and exits with its code', async () => {
    let text = ''
    const dec = new TextDecoder()
    const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (text += dec.decode(d)), timeoutMs: 30_000 })
    await sbx.pty.sendInput(h.pid, enc('echo "pty-$((40+2))-$(whoami)"\n'))
    await waitFor(() => text.includes('pty-42-user'), { timeoutMs: 10_000, what: 'pty output' })
    await sbx.pty.sendInput(h.pid, enc('exit 7\n'))
    const r = await h.wait().catch((e) => e)
    assert.equal(r.exitCode, 7)
  })

  it('getHost: an HTTP server inside answers through routing headers and through the Host name', async () => {
    const body = `hello ${uid()}`
    const srvHandle = await startHttpServer(sbx, 8000, `/home/user/www-${uid()}`, { 'index.txt': body })
    try {
      const host = sbx.getHost(8000)
      assert.equal(host, `8000-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`)
      const res = await proxyFetch(sbx.sandboxId, 8000, '/index.txt')
      assert.equal(res.status, 200)
      assert.equal(await res.text(), body)
      const byHost = await hostRequest(host, '/index.txt')
      assert.equal(byHost.status, 200)
      assert.equal(byHost.body, body)
      const missing = await proxyFetch(sbx.sandboxId, 8000, '/missing.txt')
      assert.equal(missing.status, 404, 'the server inside answers its own 404')
    } finally {
      await srvHandle.kill()
    }
    const closed = await proxyFetch(sbx.sandboxId, 8001, '/')
    assert.equal(closed.status, 502, 'a closed port is 502')
    const j = await closed.json()
    assert.equal(j.sandboxId, sbx.sandboxId)
    assert.equal(j.code, 502)
    assert.match(j.message, /port is not open/)
  })

  it('WebSocket: an upgrade to a server inside (bound to 127.0.0.1) streams both ways, server pushes included', async () => {
    const port = 8765
    const script = `/home/user/ws-${uid()}.py`
    await sbx.files.write(script, WS_ECHO_SERVER)
    const srv = await sbx.commands.run(`python3 ${script} ${port}`, { background: true, timeoutMs: 0 })
    try {
      await waitFor(async () => (await sbx.commands.run(`python3 -c "import socket; socket.create_connection(('127.0.0.1', ${port}), 1)"`).catch(() => null))?.exitCode === 0,
        { timeoutMs: 20_000, intervalMs: 200, what: 'the WebSocket server to listen' })
      const ws = await wsConnect(sbx.sandboxId, port)
      try {
        assert.equal(await ws.next(), 'hello', 'the server pushes first, unasked')
        const small = `ping-${uid()}`
        ws.send(small)
        assert.equal(await ws.next(), `echo:${small}`)
        const big = 'x'.repeat(40_000) + uid()
        ws.send(big)
        assert.equal(await ws.next(), `echo:${big}`)
      } finally {
        ws.close()
      }
    } finally {
      await srv.kill()
    }
  })

  it('getMetrics returns samples within the sampling period; an old start/end range returns none [range: 2.51 only, 2.19 never sends it]', async () => {
    const m = await waitFor(async () => {
      const got = await sbx.getMetrics()
      return got.length > 0 ? got : undefined
    }, { timeoutMs: 20_000, intervalMs: 1000, what: 'a metrics sample' })
    const s = m.at(-1)
    assert.ok(s.timestamp instanceof Date && !isNaN(s.timestamp), `timestamp ${s.timestamp}`)
    assert.ok(Math.abs(s.timestamp.getTime() - Date.now()) < 60_000, 'recent timestamp')
    assert.ok(s.cpuCount >= 1)
    assert.ok(s.cpuUsedPct >= 0)
    assert.ok(s.memTotal > 0 && s.memUsed > 0 && s.memUsed <= s.memTotal, `mem ${s.memUsed}/${s.memTotal}`)
    // Disk: the root filesystem as the sandbox sees it (statfs of /, what df shows inside).
    assert.ok(s.diskUsed > 0 && s.diskTotal >= s.diskUsed, `disk ${s.diskUsed}/${s.diskTotal}`)
    const [blocks, bsize] = (await sbx.commands.run("stat -f -c '%b %S' /")).stdout.trim().split(' ').map(Number)
    assert.equal(s.diskTotal, blocks * bsize, 'disk total is the size of / inside the sandbox')
    if (!ctx.is219) {
      // 2.19 puts start/end in the path parameters, so they never reach the server.
      const old = await ctx.sdk.Sandbox.getMetrics(sbx.sandboxId, {
        start: new Date(Date.now() - 3600_000), end: new Date(Date.now() - 3000_000),
      })
      assert.deepEqual(old, [], 'a time range before the sandbox existed has no samples')
    }
  })

  it('kill while a command streams: the command fails at once [2.51: TimeoutError "sandbox was killed"; 2.19 predates that mapping: any error]', async () => {
    const victim = await ctx.create()
    const out = []
    const settled = victim.commands
      .run('while true; do echo tick; sleep 0.1; done', { timeoutMs: 60_000, onStdout: (d) => out.push(d) })
      .then(() => undefined, (e) => e)
    await waitFor(() => out.length > 0, { timeoutMs: 10_000, what: 'output' })
    const t0 = Date.now()
    await ctx.sdk.Sandbox.kill(victim.sandboxId)
    const err = await settled
    assert.ok(err, 'the command resolved although its sandbox was killed')
    assert.ok(Date.now() - t0 < 10_000, `took ${Date.now() - t0} ms to fail`)
    if (!ctx.is219) {
      assert.ok(err instanceof ctx.sdk.TimeoutError, `expected TimeoutError, got ${err.constructor.name}: ${err.message}`)
      assert.match(err.message, /sandbox was killed/)
    }
    const res = await proxyFetch(victim.sandboxId, 49983, '/health')
    assert.equal(res.status, 502)
    assert.deepEqual(await res.json(), { sandboxId: victim.sandboxId, message: 'The sandbox was not found', code: 502 })
  })

  it("the agent's internal paths are refused from outside (403) and change nothing", async () => {
    const hijack = JSON.stringify({ accessToken: 'hijacked', envVars: { HIJACKED: '1' } })
    const res = await proxyFetch(sbx.sandboxId, 49983, '/init', { method: 'POST', body: hijack, headers: { 'Content-Type': 'application/json' } })
    assert.equal(res.status, 403)
    assert.equal((await res.json()).code, 403)
    const byHost = await hostRequest(`49983-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`, '/init', { method: 'POST', body: hijack })
    assert.equal(byHost.status, 403)
    assert.equal((await sbx.commands.run('echo "[$HIJACKED]"')).stdout, '[]\n')
  })

  it("a local process that reaches the agent's published port directly cannot init it (no agent secret)", async () => {
    const plain = await ctx.create({ secure: false }) // no access token: /init's token rules alone would let anyone in
    const addr = await agentAddr(plain.sandboxId)
    assert.ok(addr, 'the agent is reachable')
    const hijack = JSON.stringify({ accessToken: 'hijacked', envVars: { HIJACKED: '1' } })
    const res = await fetch(`http://${addr}/init`, { method: 'POST', body: hijack, headers: { 'Content-Type': 'application/json' } })
    assert.equal(res.status, 401)
    assert.deepEqual(await res.json(), { code: 401, message: 'invalid agent secret' })
    assert.equal((await plain.commands.run('echo "[$HIJACKED]"')).stdout, '[]\n')
  })
})

describeEachSdk('traffic token and signed URLs', (ctx) => {
  it('allowPublicTraffic false: other ports need e2b-traffic-access-token (403 without, 200 with); the SDK still works', async () => {
    const sbx = await ctx.create({ network: { allowPublicTraffic: false } })
    assert.ok(sbx.trafficAccessToken, 'the sandbox has a traffic access token')
    await startHttpServer(sbx, 8000, `/home/user/www-${uid()}`, { 'index.txt': 'private' })
    const no = await proxyFetch(sbx.sandboxId, 8000, '/index.txt')
    assert.equal(no.status, 403)
    const j = await no.json()
    assert.equal(j.code, 403)
    assert.equal(j.sandboxId, sbx.sandboxId)
    const wrong = await proxyFetch(sbx.sandboxId, 8000, '/index.txt', { headers: { 'e2b-traffic-access-token': 'wrong' } })
    assert.equal(wrong.status, 403)
    const yes = await proxyFetch(sbx.sandboxId, 8000, '/index.txt', {
      headers: { 'e2b-traffic-access-token': sbx.trafficAccessToken },
    })
    assert.equal(yes.status, 200)
    assert.equal(await yes.text(), 'private')
    const byHost = await hostRequest(sbx.getHost(8000), '/index.txt', {
      headers: { 'E2B-Traffic-Access-Token': sbx.trafficAccessToken },
    })
    assert.equal(byHost.status, 200)
    assert.equal((await sbx.commands.run('echo envd-ok')).stdout, 'envd-ok\n')
  })

  it('httpsPorts: a server inside that speaks HTTPS with a self-signed certificate answers through the proxy', async () => {
    const sbx = await ctx.create({ network: { httpsPorts: [8443] } })
    const dir = `/home/user/tls-${uid()}`
    const body = `secure ${uid()}`
    await sbx.files.write(`${dir}/index.txt`, body)
    await sbx.files.write(`${dir}/serve.py`, HTTPS_SERVER)
    await sbx.commands.run('openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=inside -keyout key.pem -out cert.pem', { cwd: dir })
    await sbx.commands.run('python3 serve.py 8443', { background: true, cwd: dir, timeoutMs: 0 })
    const res = await waitFor(async () => {
      const r = await proxyFetch(sbx.sandboxId, 8443, '/index.txt').catch(() => null)
      return r?.status === 200 ? r : null
    }, { timeoutMs: 20_000, intervalMs: 200, what: 'the HTTPS server inside, through the proxy' })
    assert.equal(await res.text(), body)
  })

  it('a public sandbox has no traffic token and its ports need none', async () => {
    const sbx = await ctx.create()
    assert.ok(!sbx.trafficAccessToken)
    await startHttpServer(sbx, 8000, `/home/user/www-${uid()}`, { 'index.txt': 'public' })
    assert.equal((await proxyFetch(sbx.sandboxId, 8000, '/index.txt')).status, 200)
  })

  it('secure sandbox: signed upload and download URLs work as the SDK made them, by Host and by headers; expired ones are 401 JSON; unsigned 401', async () => {
    const sbx = await ctx.create({ secure: true })
    const path = `/home/user/signed-${uid()}.txt`
    // With E2B_SANDBOX_URL the SDK's URLs point at the server itself and name no sandbox: the
    // server finds it by the signature. They also route by Host (as <port>-<id>.<domain> DNS
    // would) and by the routing headers.
    const viaHost = (u, init) => {
      const url = new URL(u)
      return hostRequest(`49983-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`, url.pathname + url.search, init)
    }
    const up = await sbx.uploadUrl(path, { useSignatureExpiration: 120 })
    const form = new FormData()
    form.append('file', new Blob(['signed content']), path)
    const upRes = await fetch(up, { method: 'POST', body: form, headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } })
    assert.equal(upRes.status, 200, await upRes.clone().text())
    assert.equal(await sbx.files.read(path), 'signed content')

    const down = await sbx.downloadUrl(path)
    const plain = await fetch(down)
    assert.equal(plain.status, 200, await plain.clone().text())
    assert.equal(await plain.text(), 'signed content')
    const up2 = await sbx.uploadUrl(path, { useSignatureExpiration: 120 })
    const form2 = new FormData()
    form2.append('file', new Blob(['uploaded as given']), path)
    assert.equal((await fetch(up2, { method: 'POST', body: form2 })).status, 200)
    // Another sandbox's signature of the same path reaches only that sandbox.
    const other = await ctx.create({ secure: true })
    await other.files.write(path, 'the other one')
    assert.equal(await (await fetch(await other.downloadUrl(path))).text(), 'the other one')
    assert.equal(await sbx.files.read(path), 'uploaded as given')
    await sbx.files.write(path, 'signed content')
    const d1 = await viaHost(down)
    assert.equal(d1.status, 200)
    assert.equal(d1.body, 'signed content')
    const d2 = await fetch(down, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } })
    assert.equal(await d2.text(), 'signed content')

    const expired = await sbx.downloadUrl(path, { useSignatureExpiration: -10 })
    const e = await viaHost(expired)
    assert.equal(e.status, 401)
    assert.match(e.headers['content-type'] ?? '', /^application\/json/)
    assert.deepEqual(JSON.parse(e.body), { code: 401, message: 'signature is already expired' })

    const unsigned = new URL(down)
    unsigned.searchParams.delete('signature')
    const u = await viaHost(unsigned.toString())
    assert.equal(u.status, 401)
    const forged = new URL(down)
    forged.searchParams.set('signature', 'v1_forged')
    const f = await fetch(forged)
    assert.equal(f.status, 404, 'a URL signed by no sandbox reaches none')
    assert.match((await f.json()).message, /no running or paused sandbox's access token signed this URL/)
  })
})
