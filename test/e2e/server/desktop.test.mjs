// The "desktop" template driven by the official @e2b/desktop SDK, as a computer-use agent drives
// it: Sandbox.create() starts Xvfb and XFCE, screenshots are real PNGs of the screen, a click
// focuses a terminal and typed keys run a command in it, and the VNC stream (x11vnc + noVNC)
// comes through Warren's proxy: vnc.html and the WebSocket carrying RFB, both by
// https://6080-<id>.<domain> (the URL stream.getUrl() gives) and by the routing headers of the
// plain mode, behind the traffic token of a sandbox closed to public traffic, with and without
// the stream's password; and the dashboard's screen of the desktop, whose WebSocket relays the
// pixels of a VNC server the dashboard starts in the sandbox. The server is private to the file
// because it also serves TLS.
import { it, describe, before, after } from 'node:test'
import http from 'node:http'
import https from 'node:https'
import { randomBytes } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Sandbox } from '@e2b/desktop'
import { useServer, freePort } from './harness.mjs'
import { assert, waitFor, uid } from './helpers.mjs'

const tlsPort = await freePort()
const h = await useServer({ private: true, args: ['--tls-addr', `127.0.0.1:${tlsPort}`] })

let ca

/** The PNG's width and height from its IHDR chunk; throws unless bytes are a PNG. */
function pngSize(bytes) {
  const b = Buffer.from(bytes)
  assert.equal(b.subarray(0, 8).toString('hex'), '89504e470d0a1a0a', 'not a PNG')
  assert.equal(b.subarray(12, 16).toString(), 'IHDR')
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) }
}

/**
 * Sends an HTTP request for url (https://<port>-<id>.<domain>:<tls port>/...) to the server's
 * TLS listener on 127.0.0.1 (no DNS needed), trusting Warren's CA; resolves the response, or
 * the upgraded socket when upgrade is set.
 */
function tlsRequest(url, { headers = {}, upgrade = false } = {}) {
  const u = new URL(url)
  return request(https, {
    host: '127.0.0.1', port: u.port, servername: u.hostname, ca, path: u.pathname + u.search,
    headers: { Host: u.host, ...headers },
  }, upgrade)
}

/** The same through the plain listener with E2b-Sandbox-Id and E2b-Sandbox-Port. */
function headerRequest(sandboxId, path, { headers = {}, upgrade = false } = {}) {
  const base = new URL(process.env.E2B_SANDBOX_URL)
  return request(http, {
    host: base.hostname, port: base.port, path,
    headers: { 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': '6080', ...headers },
  }, upgrade)
}

function request(mod, opts, upgrade) {
  if (upgrade) {
    opts.headers = {
      ...opts.headers, Connection: 'Upgrade', Upgrade: 'websocket',
      'Sec-WebSocket-Key': randomBytes(16).toString('base64'), 'Sec-WebSocket-Version': '13',
    }
  }
  return new Promise((ok, fail) => {
    const req = mod.request({ ...opts, timeout: 30_000 }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => ok({ status: res.statusCode, body: Buffer.concat(chunks).toString() }))
      res.on('error', fail)
    })
    req.on('upgrade', (res, socket, head) => ok({ status: res.statusCode, socket, head }))
    req.on('timeout', () => req.destroy(new Error('request timed out')))
    req.on('error', fail)
    req.end()
  })
}

/**
 * Reads WebSocket frames from an upgraded socket: next() resolves the next message's payload
 * (the server's frames are unmasked); send(bytes) sends one masked binary frame, as a client must.
 */
function wsFrames(socket, head) {
  let buf = Buffer.from(head)
  const waiters = []
  const pump = () => {
    while (waiters.length && buf.length >= 2) {
      let n = buf[1] & 127
      let off = 2
      if (n === 126) {
        if (buf.length < 4) return
        n = buf.readUInt16BE(2)
        off = 4
      } else if (n === 127) {
        if (buf.length < 10) return
        n = Number(buf.readBigUInt64BE(2))
        off = 10
      }
      if (buf.length < off + n) return
      waiters.shift().ok(buf.subarray(off, off + n))
      buf = buf.subarray(off + n)
    }
  }
  socket.on('data', (d) => {
    buf = Buffer.concat([buf, d])
    pump()
  })
  socket.on('close', () => waiters.splice(0).forEach((w) => w.fail(new Error('the WebSocket closed'))))
  return {
    next: () => new Promise((ok, fail) => {
      const t = setTimeout(() => fail(new Error('no WebSocket frame within 15 s')), 15_000)
      waiters.push({ ok: (v) => (clearTimeout(t), ok(v)), fail })
      pump()
    }),
    send(bytes) {
      const mask = randomBytes(4)
      const payload = Buffer.from(bytes).map((x, i) => x ^ mask[i % 4])
      socket.write(Buffer.concat([Buffer.from([0x82, 0x80 | payload.length]), mask, payload]))
    },
    close: () => socket.destroy(),
  }
}

/**
 * Opens the stream's WebSocket with open(path, {headers, upgrade}) and runs RFB up to the
 * server's security types: returns them (1 = none, 2 = VNC password).
 */
async function rfbSecurityTypes(open, headers) {
  const { status, socket, head } = await open('/websockify', { headers, upgrade: true })
  assert.equal(status, 101)
  const ws = wsFrames(socket, head)
  try {
    const version = (await ws.next()).toString()
    assert.match(version, /^RFB 003\.00\d\n$/, 'the stream does not speak RFB')
    ws.send(Buffer.from('RFB 003.008\n'))
    const types = await ws.next()
    assert.ok(types[0] > 0, `the server refused the connection: ${types}`)
    return [...types.subarray(1, 1 + types[0])]
  } finally {
    ws.close()
  }
}

/**
 * Reads a byte stream carried by WebSocket messages (the dashboard's relay cuts it wherever its
 * reads of the VNC server did): read(n) resolves the next n bytes.
 */
function wsStream(ws) {
  let buf = Buffer.alloc(0)
  return {
    async read(n) {
      while (buf.length < n) buf = Buffer.concat([buf, await ws.next()])
      const out = buf.subarray(0, n)
      buf = buf.subarray(n)
      return out
    },
  }
}

/**
 * Stops the SDK's stream and waits for its x11vnc to be gone: stop() sends `pkill x11vnc` and
 * returns before the server has exited, and start() refuses while `pgrep -x x11vnc` finds it
 * ("Stream is already running", seen once in a full run).
 */
async function stopStream(desktop) {
  await desktop.stream.stop()
  await waitFor(async () => (await desktop.commands.run('pgrep -x x11vnc || true')).stdout.trim() === '',
    { timeoutMs: 15_000, what: "the stream's x11vnc to exit after stop()" })
}

/**
 * Logs into the dashboard with the API key and opens the screen of sandboxId through its
 * WebSocket as the dashboard's page does (session cookie, CSRF token, this server's Origin).
 */
async function dashboardScreen(sandboxId, apiKey) {
  const base = new URL(process.env.E2B_API_URL)
  const login = await fetch(new URL('/dashboard/api/login', base), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ apiKey }),
  })
  assert.equal(login.status, 200, await login.clone().text())
  const { csrfToken } = await login.json()
  const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ')
  const path = `/dashboard/api/sandboxes/${sandboxId}/screen?csrf=${encodeURIComponent(csrfToken)}`
  return request(http, {
    host: base.hostname, port: base.port, path, headers: { Cookie: cookie, Origin: base.origin },
  }, true)
}

describe('desktop template with @e2b/desktop', { timeout: 600_000 }, () => {
  const tag = `e2e-${uid()}`
  const ids = []
  let desktop
  before(async () => {
    // getHost keeps the port: the stream's URL is https://6080-<id>.<domain>:<tls port>/vnc.html.
    process.env.E2B_DOMAIN = `${process.env.E2B_DOMAIN}:${tlsPort}`
    ca = await readFile(join(h.server.stateDir, 'tls', 'ca.pem'))
  })
  after(async () => {
    await Promise.all(ids.map((id) => Sandbox.kill(id).catch(() => {})))
  })

  it('creates a desktop whose screenshots are PNGs of a 1024x768 screen', async () => {
    const t0 = Date.now()
    desktop = await Sandbox.create({ timeoutMs: 300_000, metadata: { e2e: tag }, network: { allowPublicTraffic: false } })
    ids.push(desktop.sandboxId)
    const shot = await desktop.screenshot()
    console.log(`# desktop create -> first screenshot: ${Date.now() - t0} ms`)
    assert.deepEqual(pngSize(shot), { width: 1024, height: 768 })
    assert.ok(shot.length > 10_000, `a ${shot.length}-byte screenshot is not of a desktop`)
    assert.deepEqual(await desktop.getScreenSize(), { width: 1024, height: 768 })
    // The agent started the desktop at boot (desktop-up's log is there); the SDK's Xvfb and
    // startxfce4 took it for theirs.
    const procs = await desktop.commands.run('test -e /tmp/.warren-xfce.log && pgrep -c -x Xvfb; pgrep -c -x xfce4-session')
    assert.equal(procs.stdout, '1\n1\n', 'one X server and one XFCE session, started at boot')
  })

  it('gives a create that asks for another resolution its own X server', async () => {
    const other = await Sandbox.create({ timeoutMs: 120_000, metadata: { e2e: tag }, resolution: [1280, 800] })
    ids.push(other.sandboxId)
    assert.deepEqual(await other.getScreenSize(), { width: 1280, height: 800 })
    assert.deepEqual(pngSize(await other.screenshot()), { width: 1280, height: 800 })
    const procs = await other.commands.run('pgrep -c -x Xvfb; pgrep -c -x xfce4-session')
    if (procs.stdout !== '1\n1\n') {
      const ps = await other.commands.run('ps -eo pid,sid,stat,etimes,args')
      assert.fail(`one X server and one XFCE session, not ${JSON.stringify(procs.stdout)}; the processes:\n${ps.stdout}`)
    }
    await other.kill()
  })

  it('moves the mouse, clicks into a terminal and types a command that runs', async () => {
    await desktop.moveMouse(100, 200)
    assert.deepEqual(await desktop.getCursorPosition(), { x: 100, y: 200 })

    await desktop.launch('xfce4-terminal')
    const win = await waitFor(async () => (await desktop.getApplicationWindows('xfce4-terminal')).find(Boolean),
      { timeoutMs: 30_000, intervalMs: 500, what: 'a terminal window' })
    const geo = (await desktop.commands.run(`xdotool getwindowgeometry --shell ${win}`)).stdout
    const g = Object.fromEntries(geo.trim().split('\n').map((l) => l.split('=')).map(([k, v]) => [k, Number(v)]))
    await desktop.leftClick(g.X + Math.floor(g.WIDTH / 2), g.Y + Math.floor(g.HEIGHT / 2))
    await waitFor(async () => (await desktop.getCurrentWindowId()) === win, { what: 'the terminal to have the focus' })
    const before = Buffer.from(await desktop.screenshot())

    const word = `typed-${uid()}`
    await desktop.write(`echo ${word} | tee /tmp/typed.txt`)
    await desktop.press('enter')
    await waitFor(async () => (await desktop.files.read('/tmp/typed.txt')) === `${word}\n`,
      { timeoutMs: 15_000, what: 'the typed command to write its file' })
    const after = Buffer.from(await desktop.screenshot())
    assert.ok(!after.equals(before), 'the screen did not change when the command ran in the terminal')
  })

  it('streams the screen through the proxy: https://6080-<id>.<domain> and routing headers, behind the traffic token', async () => {
    await desktop.stream.start()
    const url = desktop.stream.getUrl()
    const u = new URL(url)
    assert.equal(u.host, `6080-${desktop.sandboxId}.${process.env.E2B_DOMAIN}`)
    assert.equal(u.pathname, '/vnc.html')
    assert.equal(u.searchParams.get('autoconnect'), 'true')
    const token = { 'E2b-Traffic-Access-Token': desktop.trafficAccessToken }
    assert.ok(desktop.trafficAccessToken, 'a sandbox closed to public traffic has a traffic token')

    const refused = await tlsRequest(url)
    assert.equal(refused.status, 403, 'the stream of a sandbox closed to public traffic is open without its token')
    const page = await tlsRequest(url, { headers: token })
    assert.equal(page.status, 200)
    assert.match(page.body, /noVNC/)
    const byHeaders = await headerRequest(desktop.sandboxId, '/vnc.html', { headers: token })
    assert.equal(byHeaders.status, 200)
    assert.equal(byHeaders.body, page.body)
    assert.equal((await headerRequest(desktop.sandboxId, '/vnc.html')).status, 403)

    const tlsOpen = (path, o) => tlsRequest(`https://${u.host}${path}`, o)
    const plainOpen = (path, o) => headerRequest(desktop.sandboxId, path, o)
    assert.deepEqual(await rfbSecurityTypes(tlsOpen, token), [1], 'a stream without a password offers no-auth')
    assert.deepEqual(await rfbSecurityTypes(plainOpen, token), [1])
    const refusedWs = await plainOpen('/websockify', { upgrade: true })
    assert.equal(refusedWs.status, 403, 'the WebSocket is open without the traffic token')

    const viewOnly = new URL(desktop.stream.getUrl({ viewOnly: true }))
    assert.equal(viewOnly.searchParams.get('view_only'), 'true')
    assert.equal((await tlsRequest(viewOnly.href, { headers: token })).status, 200)
    await stopStream(desktop)
  })

  it("shows the desktop's screen in the dashboard: its WebSocket carries the desktop's pixels", async () => {
    const t0 = Date.now()
    const { status, socket, head } = await dashboardScreen(desktop.sandboxId, h.apiKey)
    assert.equal(status, 101)
    const ws = wsFrames(socket, head)
    try {
      const rfb = wsStream(ws)
      assert.match((await rfb.read(12)).toString(), /^RFB 003\.00\d\n$/, 'the screen does not speak RFB')
      ws.send(Buffer.from('RFB 003.008\n'))
      const n = (await rfb.read(1))[0]
      assert.ok([...(await rfb.read(n))].includes(1), 'the dashboard\'s VNC server asks for a password')
      ws.send(Buffer.from([1]))
      assert.equal((await rfb.read(4)).readUInt32BE(0), 0, 'the security handshake failed')
      ws.send(Buffer.from([1])) // ClientInit, shared
      const init = await rfb.read(24)
      assert.deepEqual({ width: init.readUInt16BE(0), height: init.readUInt16BE(2) }, { width: 1024, height: 768 })
      const bpp = init[4]
      await rfb.read(init.readUInt32BE(20)) // the desktop's name
      // FramebufferUpdateRequest of the whole screen, not incremental: raw pixels, the only
      // encoding a client that sets none gets.
      ws.send(Buffer.from([3, 0, 0, 0, 0, 0, 4, 0, 3, 0]))
      const update = await rfb.read(4)
      assert.equal(update[0], 0, 'the first message is not a FramebufferUpdate')
      const rect = await rfb.read(12)
      const [w, hgt, encoding] = [rect.readUInt16BE(4), rect.readUInt16BE(6), rect.readInt32BE(8)]
      assert.equal(encoding, 0)
      assert.ok(w * hgt > 0, 'an empty rectangle')
      const pixels = await rfb.read(w * hgt * bpp / 8)
      console.log(`# dashboard screen: ${w}x${hgt} of raw pixels ${Date.now() - t0} ms after the WebSocket's request`)
      const colours = new Set()
      for (let i = 0; i < pixels.length && colours.size < 2; i += bpp / 8) colours.add(pixels.readUIntLE(i, bpp / 8))
      assert.ok(colours.size > 1, 'the screen is one colour: no desktop on it')
    } finally {
      ws.close()
    }
  })

  it('streams with a password: getUrl({ authKey }) and VNC authentication', async () => {
    await desktop.stream.start({ requireAuth: true })
    const key = desktop.stream.getAuthKey()
    assert.match(key, /^[A-Za-z0-9]{16}$/)
    const url = new URL(desktop.stream.getUrl({ authKey: key }))
    assert.equal(url.searchParams.get('password'), key)
    const token = { 'E2b-Traffic-Access-Token': desktop.trafficAccessToken }
    const plainOpen = (path, o) => headerRequest(desktop.sandboxId, path, o)
    assert.deepEqual(await rfbSecurityTypes(plainOpen, token), [2], 'a stream with a password offers only VNC authentication')
    // x11vnc's SIGTERM handler can hang on a lock; the image's x11vnc then kills the server. One
    // that a SIGTERM does not end, here a stopped one, is gone after stop() all the same.
    const frozen = await desktop.commands.run(
      `pid=$(netstat -tlnp 2>/dev/null | awk '$4 ~ /:5900$/ { split($7, p, "/"); print p[1]; exit }'); kill -STOP "$pid" && echo "$pid"`)
    assert.match(frozen.stdout, /^\d+\n$/, 'no x11vnc listens on the stream\'s port')
    await stopStream(desktop)
  })
})
