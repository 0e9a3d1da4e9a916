// Limits on clients' connections, on a private `warren serve` with short ones
// (--idle-timeout 2s, --body-timeout 2s): an idle keep-alive connection is closed, a body
// trickled below the minimum pace is cut with 408, a request refused before its body is read is
// answered at once with Connection: close, while what the SDK does keeps working: a
// background command silent for longer than every limit still streams its later output and
// exits, a file watch reports an event after the same silence, a big upload passes.
import { it } from 'node:test'
import net from 'node:net'
import { useServer } from './harness.mjs'
import { assert, describeEachSdk, waitFor, sleep, uid } from './helpers.mjs'

const LIMIT_S = 2
const h = await useServer({ private: true, args: ['--idle-timeout', `${LIMIT_S}s`, '--body-timeout', `${LIMIT_S}s`] })

// The big upload's bytes, made before any request: filling 32 MiB blocks the event loop for
// 0.3 s on a quiet machine and for seconds in a full run, and a client blocked past the idle
// limit right after a request has not seen the server close that keep-alive connection when it
// sends the upload on it (e2b 2.19 keeps one connection for file writes): write EPIPE.
const BIG = new Uint8Array(32 << 20).map((_, i) => i % 251)

/** A raw connection to the server; resolves once connected. */
function connect() {
  const { port } = new URL(h.url)
  return new Promise((ok, fail) => {
    const s = net.connect(port, '127.0.0.1', () => ok(s))
    s.once('error', fail)
  })
}

/** Resolves with how long after the call the server closed s (or rejects after ms). */
function closedWithin(s, ms) {
  const start = Date.now()
  return new Promise((ok, fail) => {
    const t = setTimeout(() => fail(new Error(`connection still open after ${ms} ms`)), ms)
    s.once('close', () => {
      clearTimeout(t)
      ok(Date.now() - start)
    })
  })
}

it('an idle keep-alive connection is closed after --idle-timeout', async () => {
  const s = await connect()
  let got = ''
  s.on('data', (d) => (got += d))
  s.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n')
  await waitFor(() => got.includes('204'), { what: 'the health answer' })
  const after = await closedWithin(s, (LIMIT_S + 5) * 1000)
  assert.ok(after < (LIMIT_S + 2) * 1000, `closed after ${after} ms`)
})

it('a body trickled below the minimum pace is cut with 408', async () => {
  const s = await connect()
  let got = ''
  s.on('data', (d) => (got += d))
  s.on('error', () => {})
  s.write(`POST /v2/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: ${h.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`)
  const start = Date.now()
  const trickle = setInterval(() => s.writable && s.write('{'), 500)
  try {
    await closedWithin(s, (LIMIT_S + 5) * 1000)
  } finally {
    clearInterval(trickle)
  }
  assert.match(got, /^HTTP\/1\.1 408 /, got)
  assert.match(got, /"code":408/)
  assert.ok(Date.now() - start < (LIMIT_S + 2) * 1000, `cut after ${Date.now() - start} ms`)
})

it('a request refused before its body is needed is answered at once, with Connection: close, and closed', async () => {
  const s = await connect()
  let got = ''
  s.on('data', (d) => (got += d))
  s.on('error', () => {})
  // No API key: refused before the body is read. One byte of 1000 comes, then one every 5 s.
  s.write('POST /sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{')
  const start = Date.now()
  const trickle = setInterval(() => s.writable && s.write(' '), 5000)
  try {
    await closedWithin(s, 1000)
  } finally {
    clearInterval(trickle)
  }
  assert.match(got, /^HTTP\/1\.1 401 /, got)
  assert.match(got, /\r\nConnection: close\r\n/i)
  assert.ok(Date.now() - start < 1000, `answered after ${Date.now() - start} ms`)
})

describeEachSdk('long streams under short connection limits', (ctx) => {
  it('a background command silent for longer than the limits streams its later output', async () => {
    const sbx = await ctx.create()
    const out = []
    const cmd = await sbx.commands.run(`echo early; sleep ${3 * LIMIT_S}; echo late`, {
      background: true, timeoutMs: 0, onStdout: (d) => out.push(d),
    })
    const res = await cmd.wait()
    assert.equal(res.exitCode, 0)
    assert.equal(out.join(''), 'early\nlate\n')
  })

  it('a watch silent for longer than the limits reports a later event; a big upload passes', async () => {
    const sbx = await ctx.create()
    const dir = `/home/user/w-${uid()}`
    await sbx.files.makeDir(dir)
    const events = []
    const w = await sbx.files.watchDir(dir, (e) => events.push(e))
    try {
      await sleep(3 * LIMIT_S * 1000)
      await sbx.files.write(`${dir}/late.txt`, 'x')
      await waitFor(() => events.some((e) => e.name === 'late.txt'), { timeoutMs: 10_000, what: 'the watch event after the silence' })
    } finally {
      await w.stop()
    }
    await sbx.files.write(`${dir}/big.bin`, BIG.buffer)
    assert.equal((await sbx.commands.run(`stat -c %s ${dir}/big.bin`)).stdout.trim(), String(32 << 20))
  })
})
