// Access token and signed /files URLs, against a second agent initialised with an access token
// (debug-sandbox.sh start --port 49984 --token T; run.sh passes T in WARREN_E2E_SECURE_TOKEN).
//
// In debug mode the SDK has no access token, so it never signs. Here the wire is checked with
// plain fetch and signatures computed by our own code (sign() below), and the SDK is pointed at
// the secure agent through its sandboxUrl option with the token, to check the URLs it builds.
import { describe, it, before } from 'node:test'
import { createHash } from 'node:crypto'
import { assert, SDKS, SECURE_PORT, SECURE_TOKEN, rejectsWith, uid } from './helpers.mjs'

const T = { timeout: 30_000 }
const base = `http://127.0.0.1:${SECURE_PORT}`
const UNAUTHORIZED = {
  code: 401,
  message: 'unauthorized access, please provide a valid access token or method signing if supported',
}

/** Signature for a /files URL: v1_ + unpadded base64 of sha256("path:op:user:token[:exp]"). */
function sign({ path, operation, user = '', token = SECURE_TOKEN, expiration }) {
  let s = `${path}:${operation}:${user}:${token}`
  if (expiration !== undefined) s += `:${expiration}`
  return 'v1_' + createHash('sha256').update(s).digest('base64').replace(/=+$/, '')
}

function filesUrl(q) {
  const u = new URL('/files', base)
  for (const [k, v] of Object.entries(q)) if (v !== undefined) u.searchParams.set(k, String(v))
  return u.toString()
}

function multipart(filename, content) {
  const fd = new FormData()
  fd.append('file', new Blob([content]), filename)
  return fd
}

async function jsonOf(res) {
  const text = await res.text()
  try {
    return JSON.parse(text)
  } catch {
    assert.fail(`expected a JSON body, got ${res.status} ${JSON.stringify(text)}`)
  }
}

before(() => {
  assert.ok(SECURE_TOKEN, 'WARREN_E2E_SECURE_TOKEN is not set: start the secure agent with test/e2e/run.sh')
})

describe('signed /files URLs and the access token (plain fetch)', () => {
  it('our signature matches the published test vector', () => {
    assert.equal(
      sign({ path: 'hello.txt', operation: 'read', user: 'user', token: '0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0' }),
      'v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E',
    )
  })

  it('GET /health needs no token', T, async () => {
    const res = await fetch(`${base}/health`)
    assert.equal(res.status, 204)
  })

  it('a signed upload and a signed download work', T, async () => {
    const path = `/home/user/signed-${uid()}.txt`
    const body = `signed content ${uid()}`
    const up = await fetch(filesUrl({ path, signature: sign({ path, operation: 'write' }) }), {
      method: 'POST',
      body: multipart(path, body),
    })
    assert.equal(up.status, 200, await up.clone().text())
    assert.deepStrictEqual(await up.json(), [{ name: path.split('/').pop(), path, type: 'file' }])
    const down = await fetch(filesUrl({ path, signature: sign({ path, operation: 'read' }) }))
    assert.equal(down.status, 200)
    assert.equal(await down.text(), body)
  })

  it('a signature with a future expiration works, with a username too', T, async () => {
    const path = `signed-exp-${uid()}.txt`
    const expiration = Math.floor(Date.now() / 1000) + 120
    const up = await fetch(
      filesUrl({
        path,
        username: 'user',
        signature: sign({ path, operation: 'write', user: 'user', expiration }),
        signature_expiration: expiration,
      }),
      { method: 'POST', body: multipart(path, 'exp ok') },
    )
    assert.equal(up.status, 200, await up.clone().text())
    assert.equal((await up.json())[0].path, `/home/user/${path}`)
    const down = await fetch(
      filesUrl({
        path,
        username: 'user',
        signature: sign({ path, operation: 'read', user: 'user', expiration }),
        signature_expiration: expiration,
      }),
    )
    assert.equal(down.status, 200)
    assert.equal(await down.text(), 'exp ok')
  })

  it('signed as root, a relative path lands in /root', T, async () => {
    const path = `root-${uid()}.txt`
    const up = await fetch(
      filesUrl({ path, username: 'root', signature: sign({ path, operation: 'write', user: 'root' }) }),
      { method: 'POST', body: multipart(path, 'as root') },
    )
    assert.equal(up.status, 200, await up.clone().text())
    assert.deepStrictEqual(await up.json(), [{ name: path, path: `/root/${path}`, type: 'file' }])
    const down = await fetch(
      filesUrl({ path, username: 'root', signature: sign({ path, operation: 'read', user: 'root' }) }),
    )
    assert.equal(await down.text(), 'as root')
    await fetch(`${base}/filesystem.Filesystem/Remove`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Access-Token': SECURE_TOKEN, Authorization: 'Basic cm9vdDo=' },
      body: JSON.stringify({ path: `/root/${path}` }),
    })
  })

  it('an expired signature is refused with 401 "signature is already expired"', T, async () => {
    const path = `expired-${uid()}.txt`
    const expiration = Math.floor(Date.now() / 1000) - 10
    for (const operation of ['read', 'write']) {
      const res = await fetch(
        filesUrl({ path, signature: sign({ path, operation, expiration }), signature_expiration: expiration }),
        operation === 'write' ? { method: 'POST', body: multipart(path, 'x') } : {},
      )
      assert.equal(res.status, 401, operation)
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
      assert.deepStrictEqual(await jsonOf(res), { code: 401, message: 'signature is already expired' })
    }
  })

  it('a missing or wrong signature, or the signature of the other operation, is refused', T, async () => {
    const path = `nosig-${uid()}.txt`
    let res = await fetch(filesUrl({ path }))
    assert.equal(res.status, 401)
    assert.deepStrictEqual(await jsonOf(res), { code: 401, message: 'missing signature query parameter' })
    res = await fetch(filesUrl({ path, signature: sign({ path, operation: 'read', token: 'wrong' }) }))
    assert.equal(res.status, 401)
    assert.deepStrictEqual(await jsonOf(res), { code: 401, message: 'invalid signature' })
    res = await fetch(filesUrl({ path, signature: sign({ path, operation: 'read' }) }), {
      method: 'POST',
      body: multipart(path, 'x'),
    })
    assert.equal(res.status, 401, 'a read signature must not allow a write')
    res = await fetch(filesUrl({ path: `${path}.other`, signature: sign({ path, operation: 'read' }) }))
    assert.equal(res.status, 401, 'a signature is bound to its path')
  })

  it('the X-Access-Token header works instead of a signature; a wrong one is refused', T, async () => {
    const path = `/tmp/token-${uid()}.txt`
    const up = await fetch(filesUrl({ path }), {
      method: 'POST',
      headers: { 'X-Access-Token': SECURE_TOKEN },
      body: multipart(path, 'via header'),
    })
    assert.equal(up.status, 200, await up.clone().text())
    const down = await fetch(filesUrl({ path }), { headers: { 'X-Access-Token': SECURE_TOKEN } })
    assert.equal(await down.text(), 'via header')
    const bad = await fetch(filesUrl({ path, signature: sign({ path, operation: 'read' }) }), {
      headers: { 'X-Access-Token': 'wrong' },
    })
    assert.equal(bad.status, 401)
    assert.deepStrictEqual(await jsonOf(bad), { code: 401, message: 'access token present in header but does not match' })
  })

  it('RPC without the access token is refused with 401 JSON', T, async () => {
    for (const headers of [{}, { 'X-Access-Token': 'wrong' }]) {
      const res = await fetch(`${base}/process.Process/List`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', ...headers },
        body: '{}',
      })
      assert.equal(res.status, 401)
      assert.deepStrictEqual(await jsonOf(res), UNAUTHORIZED)
    }
    const ok = await fetch(`${base}/process.Process/List`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', 'X-Access-Token': SECURE_TOKEN },
      body: '{}',
    })
    assert.equal(ok.status, 200)
  })

  it('POST /init with a different token is refused; the same token is accepted', T, async () => {
    const bad = await fetch(`${base}/init`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ accessToken: 'another-token', defaultUser: 'user', defaultWorkdir: '/home/user' }),
    })
    assert.equal(bad.status, 401)
    const same = await fetch(`${base}/init`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Access-Token': SECURE_TOKEN },
      body: JSON.stringify({ accessToken: SECURE_TOKEN, defaultUser: 'user', defaultWorkdir: '/home/user' }),
    })
    assert.equal(same.status, 204)
  })
})

for (const [version, sdk] of SDKS) {
  describe(`SDK against the secure agent [${version}]`, () => {
    const secure = (token = SECURE_TOKEN) =>
      new sdk.Sandbox({
        sandboxId: 'securedebug',
        envdVersion: '0.6.13',
        envdAccessToken: token,
        debug: true,
        sandboxUrl: base,
      })

    it('commands and files work with the token; a wrong token gives AuthenticationError', T, async () => {
      const sbx = secure()
      assert.equal((await sbx.commands.run('whoami')).stdout, 'user\n')
      const path = `/tmp/sdk-secure-${uid()}.txt`
      await sbx.files.write(path, 'secure write')
      assert.equal(await sbx.files.read(path), 'secure write')
      const wrong = secure('not-the-token')
      await rejectsWith(wrong.commands.run('whoami'), sdk.AuthenticationError)
      await rejectsWith(wrong.files.list('/tmp'), sdk.AuthenticationError)
    })

    it('uploadUrl and downloadUrl are signed as we sign, and work with fetch', T, async () => {
      const sbx = secure()
      const path = `sdk-url-${uid()}.txt`
      const up = new URL(await sbx.uploadUrl(path))
      assert.equal(up.searchParams.get('path'), path)
      assert.equal(up.searchParams.get('signature'), sign({ path, operation: 'write' }))
      const res = await fetch(up, { method: 'POST', body: multipart(path, 'by url') })
      assert.equal(res.status, 200, await res.clone().text())
      assert.equal((await res.json())[0].path, `/home/user/${path}`)
      const down = new URL(await sbx.downloadUrl(path))
      assert.equal(down.searchParams.get('signature'), sign({ path, operation: 'read' }))
      assert.equal(await (await fetch(down)).text(), 'by url')
    })

    it('URLs with an expiration work until they expire; expired ones give the exact 401 JSON', T, async () => {
      const sbx = secure()
      const path = `sdk-exp-${uid()}.txt`
      const up = await sbx.uploadUrl(path, { useSignatureExpiration: 60, user: 'user' })
      assert.equal((await fetch(up, { method: 'POST', body: multipart(path, 'exp') })).status, 200)
      const ok = await sbx.downloadUrl(path, { useSignatureExpiration: 60, user: 'user' })
      assert.equal(await (await fetch(ok)).text(), 'exp')
      const expired = await sbx.downloadUrl(path, { useSignatureExpiration: -10, user: 'user' })
      const res = await fetch(expired)
      assert.equal(res.status, 401)
      assert.deepStrictEqual(await jsonOf(res), { code: 401, message: 'signature is already expired' })
    })
  })
}
