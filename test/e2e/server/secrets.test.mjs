// Secrets and workload identity's control plane against a real `warren serve` through the
// official SDK (Secret exists in the e2b pinned as newest, 2.51): Secret.create, getInfo by ID and
// by name, list (paged), exists, update (versions, metadata), destroy; bad names and values;
// another team (a key made with `warren keys create --team`) sees none of them. No answer, no
// server log line, no byte of the store in the clear and nothing inside a sandbox whose rules name
// the secret carries its value; getInfo shows the rules with their placeholders. A rule whose
// placeholder cannot resolve (unknown secret, another team's, a token not in iam.tokens) is
// refused at create and at updateNetwork. The OIDC issuer's discovery document and JWKS are
// served without a key. Header injection itself (the egress gateway) is tested in egress files.
import { it, describe, before } from 'node:test'
import { execFile } from 'node:child_process'
import { readFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Sandbox, Secret, SecretError, SecretNotFoundError } from 'e2b'
import { useServer, WARREN_BIN } from './harness.mjs'
import { assert, uid } from './helpers.mjs'

const srv = await useServer({ private: true })

async function otherTeam() {
  const { stdout } = await promisify(execFile)(WARREN_BIN, ['keys', 'create', '--team', `other-${uid()}`, ...srv.server.storeFlags])
  return stdout.trim()
}

// raw answers the API's JSON as text, for checks the SDK's parsing would hide.
async function raw(method, path, body, apiKey = srv.apiKey) {
  const res = await fetch(srv.url + path, {
    method, headers: { 'X-API-Key': apiKey, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body),
  })
  return { status: res.status, text: await res.text() }
}

describe('secrets', { timeout: 180_000 }, () => {
  const value = `sk-e2e-${uid()}-never-shown`
  const name = `e2e-key-${uid()}`
  let info

  before(async () => {
    info = await Secret.create(name, value, { metadata: { owner: 'e2e' } })
  })

  it('create, getInfo, list, exists, update, destroy', async () => {
    assert.match(info.secretId, /^sec_/)
    assert.equal(info.name, name)
    assert.equal(info.version, 1)
    assert.deepEqual(info.metadata, { owner: 'e2e' })
    assert.ok(info.createdAt instanceof Date && !isNaN(info.createdAt))

    const upper = `E2E-Mixed-${uid()}`
    const mixed = await Secret.create(upper, 'v')
    assert.equal(mixed.name, upper.toLowerCase(), 'names are stored lowercase')
    assert.equal((await Secret.getInfo(upper)).secretId, mixed.secretId, 'a name reaches it in any case')
    assert.equal((await Secret.getInfo(mixed.secretId)).name, mixed.name)

    const seen = []
    const pages = Secret.list({ limit: 1 })
    while (pages.hasNext) {
      const page = await pages.nextItems()
      assert.ok(page.length <= 1)
      seen.push(...page.map((s) => s.name))
    }
    assert.ok(seen.includes(name) && seen.includes(mixed.name), `listed ${seen}`)

    assert.equal(await Secret.exists(name), true)
    const up = await Secret.update(name, `${value}-2`)
    assert.equal(up.version, 2)
    assert.deepEqual(up.metadata, { owner: 'e2e' }, 'an update without metadata keeps it')
    const up3 = await Secret.update(info.secretId, value, { metadata: { owner: 'ci' } })
    assert.equal(up3.version, 3)
    assert.deepEqual(up3.metadata, { owner: 'ci' })

    assert.equal(await Secret.destroy(mixed.name), true)
    assert.equal(await Secret.destroy(mixed.secretId), false, 'a second destroy finds nothing')
    assert.equal(await Secret.exists(mixed.secretId), false)
    await assert.rejects(Secret.getInfo(mixed.name), SecretNotFoundError)
    await assert.rejects(Secret.update(mixed.name, 'v'), SecretNotFoundError)
  })

  it('refuses bad names and values, and a name taken', async () => {
    for (const bad of ['has space', 'a/b', 'a.b', 'sec_reserved', 'x'.repeat(129)]) {
      await assert.rejects(Secret.create(bad, 'v'), (e) => e instanceof SecretError && /invalid secret name/.test(e.message), `name ${JSON.stringify(bad)}`)
    }
    await assert.rejects(Secret.create(`n-${uid()}`, 'line\n'), (e) => e instanceof SecretError && /control character/.test(e.message))
    await assert.rejects(Secret.create(`n-${uid()}`, ''), (e) => e instanceof SecretError && /empty/.test(e.message))
    await assert.rejects(Secret.create(name.toUpperCase(), 'v'), (e) => e instanceof SecretError && /already exists/.test(e.message))
  })

  it('another team sees none of them', async () => {
    const apiKey = await otherTeam()
    await assert.rejects(Secret.getInfo(name, { apiKey }), SecretNotFoundError)
    await assert.rejects(Secret.getInfo(info.secretId, { apiKey }), SecretNotFoundError)
    await assert.rejects(Secret.update(info.secretId, 'stolen', { apiKey }), SecretNotFoundError)
    assert.equal(await Secret.destroy(info.secretId, { apiKey }), false)
    assert.equal(await Secret.exists(name, { apiKey }), false)
    const pages = Secret.list({ apiKey })
    assert.deepEqual(await pages.nextItems(), [])
    // Its names are its own, and its sandboxes cannot name the first team's secret.
    const theirs = await Secret.create(name, 'theirs', { apiKey })
    assert.notEqual(theirs.secretId, info.secretId)
    const only = await Secret.create(`only-${uid()}`, 'v')
    await assert.rejects(
      Sandbox.create({ apiKey, network: { rules: { 'api.example.com': [{ transform: { headers: { 'X-Key': Secret.fill(only.name) } } }] } } }),
      (e) => e.message.includes(`\${e2b.secrets.${only.name}}`))
    assert.equal((await Secret.getInfo(name)).version, 3, 'the first team\'s secret is untouched')
  })

  it('a sandbox with rules shows placeholders, never the value; unresolvable ones are refused', async () => {
    const token = { audience: 'sts.amazonaws.com', tokenType: 'JWT-SVID' }
    await assert.rejects(
      Sandbox.create({ network: { rules: { 'api.example.com': [{ transform: { headers: { Authorization: `Bearer ${Secret.fill('no-such-secret')}` } } }] } } }),
      (e) => /\$\{e2b\.secrets\.no-such-secret\}/.test(e.message))
    await assert.rejects(
      Sandbox.create({ network: { rules: { 'api.example.com': [{ transform: { headers: { 'X-T': '${e2b.identity.tokens.aws}' } } }] } } }),
      (e) => /\$\{e2b\.identity\.tokens\.aws\}/.test(e.message))
    await assert.rejects(Sandbox.create({ network: { maskRequestHost: 'x.example.com\r\nX-Evil: 1' } }), /maskRequestHost/)

    const withRules = {
      iam: { tokens: { aws: Secret.iamToken(token) } },
      envs: { PLAIN: 'plain' },
      network: {
        allowOut: ['api.example.com'],
        maskRequestHost: 'masked.example:${PORT}',
        rules: {
          'API.example.com': [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}` } } }],
          '*.example.org': [{ transform: ({ iam }) => ({ headers: { 'X-Token': iam.tokens.aws } }) }],
        },
      },
    }
    const sbx = await Sandbox.create(withRules)
    try {
      const got = await sbx.getInfo()
      assert.deepEqual(got.network?.rules?.['api.example.com'], [{ transform: { headers: { Authorization: `Bearer \${e2b.secrets.${name}}` } } }])
      assert.deepEqual(got.network?.rules?.['*.example.org'], [{ transform: { headers: { 'X-Token': '${e2b.identity.tokens.aws}' } } }])
      assert.equal(got.network?.maskRequestHost, 'masked.example:${PORT}')
      assert.ok(!JSON.stringify(got).includes(value))
      assert.ok(!(await raw('GET', `/sandboxes/${sbx.sandboxId}`)).text.includes(value))
      // Nothing inside: not in any process's environment, not in a file the sandbox can read.
      // The value reaches the shell base64-encoded, so that this command itself does not hold it.
      const b64 = Buffer.from(value).toString('base64')
      const inside = await sbx.commands.run(`v=$(echo ${b64} | base64 -d); cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -cF -- "$v"; ` +
        `grep -rlF -D skip --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -- "$v" / 2>/dev/null | head -3; true`, { user: 'root' })
      assert.equal(inside.stdout.trim(), '0', `the value is inside the sandbox: ${inside.stdout}`)

      await assert.rejects(
        Sandbox.updateNetwork(sbx.sandboxId, { rules: { 'x.example.com': [{ transform: { headers: { A: '${e2b.identity.tokens.gcp}' } } }] } }),
        /\$\{e2b\.identity\.tokens\.gcp\}/)
      await Sandbox.updateNetwork(sbx.sandboxId, { rules: { 'x.example.com': [{ transform: { headers: { A: `${Secret.fill(name)} \${e2b.identity.tokens.aws}` } } }] } })
      const after = await sbx.getInfo()
      assert.deepEqual(Object.keys(after.network?.rules ?? {}), ['x.example.com'])
    } finally {
      await sbx.kill()
    }
  })

  it('no answer, log line or stored byte carries a value', async () => {
    for (const [method, path, body] of [
      ['GET', '/secrets'], ['GET', `/secrets/${name}`], ['GET', `/secrets/${info.secretId}`],
      ['POST', `/secrets/${name}`, { value }], ['POST', '/secrets', { name: `echo-${uid()}`, value }],
    ]) {
      const res = await raw(method, path, body)
      assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`)
      assert.ok(!res.text.includes(value), `${method} ${path} answers the value`)
    }
    assert.ok(!(await readFile(srv.server.logPath, 'utf8')).includes(value), 'the server log has the value')
    for (const f of await readdir(srv.server.stateDir)) {
      if (!f.startsWith('warren.db')) continue
      assert.ok(!(await readFile(join(srv.server.stateDir, f))).includes(value), `${f} holds the value in the clear`)
    }
  })

  it('serves the OIDC discovery document and JWKS without a key', async () => {
    const disc = await (await fetch(`${srv.url}/.well-known/openid-configuration`)).json()
    assert.equal(disc.issuer, srv.url)
    assert.equal(disc.jwks_uri, `${srv.url}/.well-known/jwks.json`)
    assert.deepEqual(disc.id_token_signing_alg_values_supported, ['ES256'])
    const jwks = await (await fetch(disc.jwks_uri)).json()
    assert.ok(jwks.keys.length >= 1 && jwks.keys.every((k) => k.kty === 'EC' && k.alg === 'ES256' && k.kid && !('d' in k)), JSON.stringify(jwks))
  })
})
