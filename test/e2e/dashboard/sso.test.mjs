// The dashboard's single sign-on in Debian's chromium against a real OpenID Connect provider:
// Dex (github.com/dexidp/dex, built from the Go module proxy by scripts/build-dex.sh; DEX_BIN
// names the binary), on 127.0.0.1 with its static password connector and a static confidential
// client that must use PKCE. Users log in through Dex's own login form:
//   alice (group warren-team-a)    sees team-a's sandbox, never team-b's (UI and API), and no
//                                   operator view;
//   olga (group warren-operators)  sees the operator's teams view;
//   nina (no team group)           is refused with a page saying why;
// and a callback that this browser did not start is refused. Run: test/e2e/dashboard/run.sh
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { promisify } from 'node:util'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, openSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { chromium } from 'playwright-core'
import { Sandbox } from 'e2b'
import { useServer, WARREN_BIN, freePort } from '../server/harness.mjs'
import { waitFor } from '../server/helpers.mjs'

const run = promisify(execFile)
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium'
const DEX_BIN = process.env.DEX_BIN
if (!DEX_BIN) throw new Error('DEX_BIN is not set: run test/e2e/dashboard/run.sh, which builds Dex (scripts/build-dex.sh)')
const shots = process.env.WARREN_DASHBOARD_SHOTS || mkdtempSync(join(tmpdir(), 'warren-dashboard-shots-'))
mkdirSync(shots, { recursive: true })

const dir = mkdtempSync(join(tmpdir(), 'warren-sso-'))
const dexPort = await freePort()
const issuer = `http://127.0.0.1:${dexPort}/dex`
const clientID = 'warren-dashboard'
const secret = randomBytes(16).toString('hex')
const secretFile = join(dir, 'client-secret')
writeFileSync(secretFile, `${secret}\n`, { mode: 0o600 })

// Dex reads this bcrypt hash of every user's password (made once with Go's x/crypto/bcrypt).
const PASSWORD = 'warren-sso-e2e'
const HASH = '$2a$10$MC/VUoJ4zH6YkQcSqT/8sOHZLzVYBSXWNZ3v6NvQuWQsG/I7tdCHG'
const users = {
  alice: { email: 'alice@a.example', groups: ['warren-team-a', 'staff'] },
  olga: { email: 'olga@ops.example', groups: ['warren-operators'] },
  nina: { email: 'nina@none.example', groups: ['staff'] },
}

// Dex is started once the server's port is known (the server discovers its provider at the
// first login, so Dex may come up after it).
const srv = await useServer({
  private: true,
  args: ['--sso-issuer', issuer, '--sso-client-id', clientID, '--sso-client-secret-file', secretFile,
    '--sso-scopes', 'openid,email,profile,groups', '--sso-team-claim', 'groups', '--sso-team-prefix', 'warren-',
    '--sso-operator-claim', 'groups', '--sso-operator-value', 'warren-operators'],
})

/** Dex on dexPort, its config written for the server's callback; resolves when it answers. */
async function startDex() {
  const config = {
    issuer,
    storage: { type: 'memory' },
    web: { http: `127.0.0.1:${dexPort}` },
    logger: { level: 'info' },
    oauth2: { skipApprovalScreen: true, passwordConnector: 'local', pkce: { enforce: true } },
    enablePasswordDB: true,
    staticClients: [{ id: clientID, name: 'Warren', secret, redirectURIs: [`${srv.url}/dashboard/api/sso/callback`] }],
    staticPasswords: Object.entries(users).map(([name, u], i) => ({
      email: u.email, username: name, userID: `user-${i}`, hash: HASH, groups: u.groups,
    })),
  }
  const file = join(dir, 'dex.json') // JSON is YAML, which Dex reads
  writeFileSync(file, JSON.stringify(config))
  const log = openSync(join(dir, 'dex.log'), 'a')
  const proc = spawn(DEX_BIN, ['serve', file], { stdio: ['ignore', log, log] })
  let exited = null
  proc.once('exit', (code) => { exited = code })
  await waitFor(async () => {
    if (exited !== null) throw new Error(`dex exited (${exited}): ${readFileSync(join(dir, 'dex.log'), 'utf8').slice(-2000)}`)
    const r = await fetch(`${issuer}/.well-known/openid-configuration`).catch(() => null)
    return r?.ok
  }, { timeoutMs: 30_000, what: 'dex answering its discovery document' })
  return proc
}

/** A new team with its key, made in the server's store. */
async function newTeam(team) {
  const { stdout } = await run(WARREN_BIN, ['keys', 'create', '--team', team, ...srv.server.storeFlags])
  return stdout.trim()
}

describe('dashboard single sign-on through Dex in chromium', () => {
  let browser, dex
  const sandboxes = []
  let inA, inB

  before(async () => {
    dex = await startDex()
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--no-first-run'],
    })
    const [keyA, keyB] = await Promise.all([newTeam('team-a'), newTeam('team-b')])
    inA = await Sandbox.create({ apiKey: keyA, metadata: { owner: 'sso-e2e' }, timeoutMs: 120_000 })
    sandboxes.push(inA)
    inB = await Sandbox.create({ apiKey: keyB, metadata: { owner: 'sso-e2e' }, timeoutMs: 120_000 })
    sandboxes.push(inB)
  })
  after(async () => {
    await browser?.close()
    for (const sb of sandboxes) await sb.kill().catch(() => {})
    dex?.kill('SIGTERM')
    rmSync(dir, { recursive: true, force: true })
  })

  /** Logs name in through Dex's form in a fresh browser context; returns the page. */
  async function ssoLogin(name) {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } })
    const page = await ctx.newPage()
    page.setDefaultTimeout(20_000)
    await page.goto(`${srv.url}/dashboard/`)
    const button = page.getByRole('button', { name: 'Log in with single sign-on' })
    await button.waitFor()
    if (name === 'alice') await page.screenshot({ path: join(shots, 'sso-login.png') })
    await button.click()
    await page.waitForURL((u) => u.href.startsWith(issuer))
    await page.locator('#login').fill(users[name].email)
    await page.locator('#password').fill(PASSWORD)
    await page.locator('#submit-login').click()
    await page.waitForURL((u) => u.href.startsWith(srv.url))
    return page
  }

  it('logs a team-a user in through Dex: team-a sandboxes only, in the UI and the API, no operator views', async () => {
    const page = await ssoLogin('alice')
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor()
    await page.locator(`tr[data-id="${inA.sandboxId}"]`).waitFor()
    assert.equal(await page.locator(`tr[data-id="${inB.sandboxId}"]`).count(), 0, "team-b's sandbox is not listed")
    await page.screenshot({ path: join(shots, 'sso-team-a.png') })
    assert.equal(await page.getByRole('link', { name: 'Teams' }).count(), 0, 'no operator view in the menu')

    const session = await (await page.request.get(`${srv.url}/dashboard/api/session`)).json()
    assert.equal(session.teamId, 'team-a')
    assert.equal(session.operator, false)
    const list = await (await page.request.get(`${srv.url}/dashboard/api/sandboxes`)).json()
    const ids = JSON.stringify(list)
    assert.ok(ids.includes(inA.sandboxId), 'the API lists team-a sandbox')
    assert.ok(!ids.includes(inB.sandboxId), "the API never lists team-b's")
    assert.equal((await page.request.get(`${srv.url}/dashboard/api/sandboxes/${inB.sandboxId}`)).status(), 404, "team-b's sandbox is not found")
    assert.equal((await page.request.get(`${srv.url}/dashboard/api/operator/teams`)).status(), 403, 'the operator API is forbidden')
    await page.context().close()
  })

  it('gives a user of the operator group the operator views', async () => {
    const page = await ssoLogin('olga')
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor()
    await page.getByRole('link', { name: 'Teams' }).click()
    await page.getByRole('heading', { name: 'Teams' }).waitFor()
    await page.getByRole('cell', { name: 'team-b' }).first().waitFor()
    await page.screenshot({ path: join(shots, 'sso-operator.png') })
    const res = await page.request.get(`${srv.url}/dashboard/api/operator/teams`)
    assert.equal(res.status(), 200)
    const teams = (await res.json()).map((t) => t.id)
    assert.ok(teams.includes('team-a') && teams.includes('team-b'), `the operator sees every team: ${teams}`)
    await page.context().close()
  })

  it('refuses a user with no team with a page that says so', async () => {
    const page = await ssoLogin('nina')
    await page.getByRole('heading', { name: 'Login refused' }).waitFor()
    assert.match(await page.locator('#reason').innerText(), /nina@none\.example is in no team of this server/)
    await page.screenshot({ path: join(shots, 'sso-refused.png') })
    const session = await page.request.get(`${srv.url}/dashboard/api/session`)
    assert.equal(session.status(), 204, 'no session was made (the session answer is empty)')
    assert.equal((await page.request.get(`${srv.url}/dashboard/api/sandboxes`)).status(), 401)
    await page.context().close()
  })

  it('refuses a callback this browser did not start', async () => {
    const res = await fetch(`${srv.url}/dashboard/api/sso/callback?code=stolen&state=forged`)
    assert.equal(res.status, 400)
    assert.match(await res.text(), /not started in this browser/)
  })
})
