// Browser tests of the dashboard (/dashboard/ of `warren serve`): Debian's chromium, driven by
// playwright-core, against a private server of the harness, with sandboxes made by the e2b SDK.
//
// Covers: login by the link of `warren dashboard` (single use: a second use fails) and by API
// key, the live list showing SDK sandboxes, a sandbox's page, a command typed into its terminal
// and its output read back, a desktop sandbox's screen (view only, then in control), its file browser (download, upload), a webhook and its delivery log, a kill reflected live in the list, a build's logs,
// the volumes view (create, usage of a sandbox's writes, who mounts it, delete refused while mounted), the other views,
// logout; no console errors anywhere. Screenshots go to $WARREN_DASHBOARD_SHOTS (default a temp
// dir, printed at the end); with WARREN_DASHBOARD_DOCS=1 one of each view is copied into
// docs/dashboard/. Run: test/e2e/dashboard/run.sh
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { createServer } from 'node:http'
import { mkdtempSync, mkdirSync, copyFileSync, rmSync, writeFileSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { Sandbox, Template, RateLimitError } from 'e2b'
import { useServer, WARREN_BIN, REPO } from '../server/harness.mjs'
import { rejectsWith } from '../common.mjs'
import { waitFor } from '../server/helpers.mjs'

const run = promisify(execFile)
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium'
const shots = process.env.WARREN_DASHBOARD_SHOTS || mkdtempSync(join(tmpdir(), 'warren-dashboard-shots-'))
mkdirSync(shots, { recursive: true })
const docs = process.env.WARREN_DASHBOARD_DOCS === '1' ? join(REPO, 'docs/dashboard') : ''

// Metrics every second, so that sparklines and charts have a shape within the test.
// Volumes with a size limit, so that the volumes view shows usage against it.
// Webhooks at private addresses allowed: the test's receiver is on 127.0.0.1.
const srv = await useServer({ private: true, args: ['--metrics-interval', '1s', '--volume-size-mb', '64', '--webhook-allow-private'] })

// loginLink runs `warren dashboard` on the server's state dir; the link is its last line.
async function loginLink() {
  const { stdout } = await run(WARREN_BIN, ['dashboard', ...srv.server.storeFlags, '--url', srv.url])
  const last = stdout.trim().split('\n').at(-1)
  assert.match(last, /^http:\/\/127\.0\.0\.1:\d+\/dashboard\/login#token=[0-9a-f]{64}$/)
  return last
}

describe('dashboard in chromium', () => {
  let browser, userDir
  const errors = [] // console errors and page errors, of every page
  const sandboxes = []

  before(async () => {
    userDir = mkdtempSync(join(tmpdir(), 'warren-chromium-'))
    browser = await chromium.launch({
      downloadsPath: userDir,
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--no-first-run'],
    })
    // launch() gives chromium a fresh user-data-dir of its own each time; userDir is its
    // scratch space for downloads and traces.
  })
  after(async () => {
    await browser?.close()
    rmSync(userDir, { recursive: true, force: true })
    for (const sb of sandboxes) await sb.kill().catch(() => {})
    console.log(`dashboard screenshots: ${shots}`)
  })

  async function newPage(viewport = { width: 1280, height: 860 }) {
    const ctx = await browser.newContext({ viewport, deviceScaleFactor: 1 })
    const page = await ctx.newPage()
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(`${page.url()}: ${m.text()}`)
    })
    page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`))
    page.setDefaultTimeout(20_000)
    return page
  }

  // refused runs f, a step whose request the server refuses on purpose (401 unless status
  // says), and drops the browser's report of that refusal (a console error of Chromium's own)
  // from errors.
  async function refused(f, status = 401) {
    const n = errors.length
    await f()
    const extra = errors.splice(n)
    assert.ok(extra.every((e) => e.includes(`status of ${status}`)), `unexpected errors: ${extra.join('; ')}`)
  }

  async function shot(page, name) {
    const file = join(shots, `${name}.png`)
    await page.screenshot({ path: file, fullPage: false })
    if (docs) {
      mkdirSync(docs, { recursive: true })
      copyFileSync(file, join(docs, `${name}.png`))
    }
  }

  it('logs in by a single-use link, lists SDK sandboxes, runs a terminal command, sees a kill live, shows a build, logs out', async () => {
    const a = await Sandbox.create({ metadata: { owner: 'dashboard-e2e', role: 'kept' }, timeoutMs: 300_000 })
    const b = await Sandbox.create({ metadata: { owner: 'dashboard-e2e', role: 'killed' }, timeoutMs: 300_000 })
    sandboxes.push(a, b)
    await a.commands.run('head -c 20000000 /dev/urandom | sha256sum') // a little CPU for the charts

    const link = await loginLink()
    const page = await newPage()
    const unauth = await page.request.get(`${srv.url}/dashboard/api/sandboxes`)
    assert.equal(unauth.status(), 401, 'no session, no sandboxes')

    await page.goto(link)
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor()
    assert.doesNotMatch(page.url(), /token=/, 'the token is dropped from the address bar')
    const rowA = page.locator(`tr[data-id="${a.sandboxId}"]`)
    const rowB = page.locator(`tr[data-id="${b.sandboxId}"]`)
    await rowA.waitFor()
    await rowB.waitFor()
    assert.match(await rowA.innerText(), /owner=dashboard-e2e/)
    assert.match(await rowA.innerText(), /running/)
    await page.waitForFunction(
      (id) => (document.querySelector(`tr[data-id="${id}"] .spark polyline`)?.getAttribute('points') ?? '').split(' ').length >= 4,
      a.sandboxId, { timeout: 30_000 })
    await shot(page, 'sandboxes')

    // Search filters the list.
    await page.getByLabel('Search sandboxes').fill('role=killed')
    await rowA.waitFor({ state: 'detached' })
    await page.getByLabel('Search sandboxes').fill('')
    await rowA.waitFor()

    // A kill by the SDK leaves the list live, without a reload.
    await b.kill()
    await rowB.waitFor({ state: 'detached', timeout: 15_000 })

    // The link was single-use.
    await refused(async () => {
      const second = await newPage()
      await second.goto(link)
      await second.getByRole('alert').filter({ hasText: /unknown, used or expired/ }).waitFor()
      await second.getByLabel('API key').waitFor()
      await second.context().close()
    })

    // The sandbox's page: facts, charts, logs, events, and the terminal.
    await rowA.getByRole('link', { name: a.sandboxId }).click()
    await page.getByRole('heading', { name: a.sandboxId }).waitFor()
    await page.getByText('sandbox.lifecycle.created'.replace('sandbox.lifecycle.', ''), { exact: true }).first().waitFor()
    await page.locator('pre.logs .line').first().waitFor()
    await page.locator('.chart polyline').first().waitFor()
    const term = page.getByRole('log', { name: /Terminal \(connected\)/ })
    await term.waitFor()
    await term.click()
    await page.keyboard.type('echo "dash-$((6*7))-board"')
    await page.keyboard.press('Enter')
    await page.waitForFunction(() => /dash-42-board/.test(document.querySelector('pre.terminal')?.textContent ?? ''), null, { timeout: 20_000 })
    await shot(page, 'sandbox')
    await page.locator('.files').scrollIntoViewIfNeeded()

    // The file browser: a file the SDK wrote is listed and downloads; an upload lands in the sandbox.
    await a.files.write('/home/user/from-sdk.txt', 'written by the SDK\n')
    const upload = join(userDir, 'from-browser.txt')
    writeFileSync(upload, 'uploaded from chromium\n')
    await page.getByLabel('Files to upload').setInputFiles(upload)
    await page.getByRole('button', { name: 'Upload here' }).click()
    await page.getByRole('status').filter({ hasText: 'Uploaded /home/user/from-browser.txt' }).waitFor()
    assert.equal(await a.files.read('/home/user/from-browser.txt'), 'uploaded from chromium\n')
    const fileLink = page.locator('.file-list').getByRole('link', { name: 'from-sdk.txt' })
    await fileLink.waitFor()
    const [download] = await Promise.all([page.waitForEvent('download'), fileLink.click()])
    assert.equal(readFileSync(await download.path(), 'utf8'), 'written by the SDK\n')
    await shot(page, 'files')

    // Actions, with confirmations: extend the timeout, then kill from the page.
    await page.getByRole('button', { name: 'Extend timeout' }).click()
    await page.getByRole('dialog').getByRole('button', { name: 'Extend' }).click()
    await page.getByRole('status').filter({ hasText: 'Timeout extended' }).waitFor()
    // A read of the sandbox the page sent before the kill may come back after it: a 404.
    await refused(async () => {
      await page.getByRole('button', { name: 'Kill' }).click()
      await page.getByRole('dialog').getByRole('button', { name: 'Kill' }).click()
      await page.getByText('killed or gone').waitFor()
    }, 404)

    // A build and its logs.
    const name = `dash-e2e-${Date.now().toString(36)}`
    await Template.build(Template().fromImage('warren/base').runCmd('echo building-for-the-dashboard').runCmd('echo second-step'), name)
    await page.getByRole('link', { name: 'Templates' }).click()
    await page.getByRole('cell', { name }).waitFor()
    await shot(page, 'templates')
    await page.getByRole('row', { name: new RegExp(name) }).getByRole('link').first().click()
    await page.locator('pre.logs').getByText('building-for-the-dashboard').first().waitFor()
    await page.locator('.progress').getByText(/2\/2 steps/).waitFor()
    await shot(page, 'build')

    // The other views.
    await page.getByRole('link', { name: 'Snapshots' }).click()
    await page.getByRole('heading', { name: 'Snapshots' }).waitFor()
    await shot(page, 'snapshots')
    await page.getByRole('link', { name: 'API keys' }).click()
    await page.getByLabel('Name').fill('from-the-browser')
    await page.getByRole('button', { name: 'Create key' }).click()
    const shown = await page.getByLabel('New API key').inputValue()
    assert.match(shown, /^e2b_[0-9a-f]{40}$/)
    await page.getByRole('cell', { name: 'from-the-browser' }).waitFor()
    await shot(page, 'keys')
    await page.getByRole('link', { name: 'Server' }).click()
    await page.getByText('docker engine').waitFor()
    await shot(page, 'server')

    // The operator's teams: use against limits, a quota edited and in effect at once.
    sandboxes.push(await Sandbox.create({ metadata: { owner: 'dashboard-e2e', role: 'counted' } }))
    await page.getByRole('link', { name: 'Teams' }).click()
    const team = page.locator('#teams tbody tr').filter({ hasText: 'default' })
    const held = team.locator('td[data-label="Sandboxes"]')
    await held.filter({ hasText: /^[1-9]\d* \/ ∞$/ }).waitFor()
    const n = (await held.innerText()).split(' ')[0]
    await team.getByRole('button', { name: 'Edit quota' }).click()
    await page.getByLabel('Sandboxes', { exact: true }).fill(n)
    await page.getByRole('button', { name: 'Save' }).click()
    await held.filter({ hasText: `${n} / ${n}` }).waitFor()
    await shot(page, 'teams')
    await rejectsWith(Sandbox.create({ retries: 0 }), RateLimitError, new RegExp(`team 'default' has ${n} of ${n} sandboxes running`))
    await team.getByRole('button', { name: 'Edit quota' }).click()
    await page.getByLabel('Sandboxes', { exact: true }).fill('')
    await page.getByRole('button', { name: 'Save' }).click()
    await held.filter({ hasText: /∞$/ }).waitFor()

    // Logout ends the session: the API answers 401 again.
    await page.getByRole('button', { name: 'Log out' }).click()
    await page.getByLabel('API key').waitFor()
    const after = await page.request.get(`${srv.url}/dashboard/api/sandboxes`)
    assert.equal(after.status(), 401, 'logged out, no sandboxes')
    await shot(page, 'login')
    await page.context().close()
  })

  it('logs in by API key, on a phone-sized screen', async () => {
    const sb = await Sandbox.create({ metadata: { owner: 'dashboard-e2e', on: 'phone' } })
    sandboxes.push(sb)
    const page = await newPage({ width: 390, height: 844 })
    await page.goto(`${srv.url}/dashboard/`)
    await refused(async () => {
      await page.getByLabel('API key').fill('e2b_0000000000000000000000000000000000000000')
      await page.getByRole('button', { name: 'Log in' }).click()
      await page.getByRole('alert').filter({ hasText: 'invalid API key' }).waitFor()
    })
    await page.getByLabel('API key').fill(srv.apiKey)
    await page.keyboard.press('Enter')
    await page.locator(`tr[data-id="${sb.sandboxId}"]`).waitFor()
    assert.equal(await page.getByRole('link', { name: 'Teams' }).count(), 0, "a team's session has no teams view")
    await shot(page, 'phone')
    await page.context().close()
  })

  it('adds a webhook and shows its delivery log', async () => {
    const got = []
    const receiver = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        got.push(JSON.parse(body))
        res.end('ok')
      })
    })
    await new Promise((ok) => receiver.listen(0, '127.0.0.1', ok))
    try {
      const page = await newPage()
      await page.goto(`${srv.url}/dashboard/webhooks`)
      await page.getByLabel('API key').fill(srv.apiKey)
      await page.keyboard.press('Enter')
      await page.getByRole('heading', { name: 'Webhooks' }).waitFor()
      await page.getByLabel('Name').fill('e2e-receiver')
      await page.getByLabel('URL').fill(`http://127.0.0.1:${receiver.address().port}/hook`)
      await page.getByLabel('Signature secret').fill('s3cret')
      await page.getByRole('button', { name: 'Add webhook' }).click()
      await page.getByRole('button', { name: 'Deliveries of e2e-receiver' }).waitFor()
      const sb = await Sandbox.create({ metadata: { owner: 'dashboard-e2e', for: 'webhook' } })
      sandboxes.push(sb)
      await page.locator('table.deliveries').getByText('delivered').first().waitFor({ timeout: 30_000 })
      assert.ok(got.some((e) => e.sandboxId === sb.sandboxId && e.type === 'sandbox.lifecycle.created'), 'the receiver got the created event')
      await shot(page, 'webhooks')
      await page.context().close()
    } finally {
      receiver.close()
    }
  })

  it('volumes: creates one, shows what a sandbox writes to it and who mounts it, deletes it once unmounted', async () => {
    const name = `dash-vol-${Date.now().toString(36)}`
    const page = await newPage()
    await page.goto(`${srv.url}/dashboard/volumes`)
    await page.getByLabel('API key').fill(srv.apiKey)
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { name: 'Volumes' }).waitFor()
    await page.getByLabel('Name').fill(name)
    await page.getByRole('button', { name: 'Create volume' }).click()
    const row = page.getByRole('row', { name: new RegExp(name) })
    await row.waitFor()
    assert.match(await row.innerText(), /none/, 'mounted by nobody yet')

    const sb = await Sandbox.create({ volumeMounts: { '/mnt/data': name }, timeoutMs: 120_000 })
    sandboxes.push(sb)
    await sb.commands.run('head -c 10485760 /dev/urandom > /mnt/data/ten-mib && sync')
    // The view reloads every 5 s: the sandbox's write is counted against the 64 MiB limit.
    await row.getByText(/^(10|11)\.\d MiB of 64\.0 MiB$/).waitFor({ timeout: 15_000 })
    await row.getByRole('link', { name: sb.sandboxId }).waitFor()
    assert.match(await row.innerText(), /\/mnt\/data/)
    const used = await row.getByRole('progressbar').getAttribute('value')
    assert.ok(Number(used) >= 14 && Number(used) <= 18, `progress ${used}%, want about 10 of 64 MiB`)
    await shot(page, 'volumes')

    await refused(async () => {
      await row.getByRole('button', { name: 'Delete' }).click()
      await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click()
      await page.getByRole('alert').filter({ hasText: /is mounted by sandbox/ }).waitFor()
    }, 409)
    await sb.kill()
    await row.getByText('none').waitFor({ timeout: 15_000 })
    await row.getByRole('button', { name: 'Delete' }).click()
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click()
    await row.waitFor({ state: 'detached' })
    await page.context().close()
  })

  it("shows a desktop sandbox's screen live, view only until Take control", async () => {
    const d = await Sandbox.create('desktop', { metadata: { owner: 'dashboard-e2e', role: 'desktop' }, timeoutMs: 300_000 })
    sandboxes.push(d)
    const mouse = async () => (await d.commands.run('xdotool getmouselocation', { envs: { DISPLAY: ':0' } })).stdout
    // The agent starts the desktop at boot; wait for its session's panel on the screen.
    await d.commands.run('until xdotool search --onlyvisible --class xfce4-panel >/dev/null 2>&1; do sleep 0.2; done',
      { envs: { DISPLAY: ':0' }, timeoutMs: 60_000 })

    const page = await newPage()
    await page.goto(`${srv.url}/dashboard/`)
    await page.getByLabel('API key').fill(srv.apiKey)
    await page.keyboard.press('Enter')
    await page.locator(`tr[data-id="${d.sandboxId}"]`).getByRole('link', { name: d.sandboxId }).click()
    await page.getByRole('heading', { name: 'Screen' }).waitFor()
    await page.getByRole('status').filter({ hasText: 'connected · view only' }).waitFor({ timeout: 30_000 })
    const canvas = page.locator('.screen canvas')
    await canvas.waitFor()
    await page.waitForFunction(() => {
      // The desktop's pixels arrived: the canvas is no longer one colour.
      const c = document.querySelector('.screen canvas')
      const px = c?.getContext('2d')?.getImageData(0, 0, c.width, c.height).data
      if (!px) return false
      for (let i = 4; i < px.length; i += 4) if (px[i] !== px[0] || px[i + 1] !== px[1] || px[i + 2] !== px[2]) return true
      return false
    }, null, { timeout: 20_000 })
    const box = await canvas.boundingBox()
    assert.ok(box.width > 300, `the screen is ${box.width} px wide`)
    // @e2b/desktop's stream.start() refuses to start while a process named x11vnc runs.
    const sdkSees = await d.commands.run('pgrep -x x11vnc', { envs: { DISPLAY: ':0' } }).catch((e) => e)
    assert.equal(sdkSees.exitCode, 1, "the dashboard's VNC server looks like the SDK's stream")

    // View only: the pointer over the screen does not move the sandbox's.
    await d.commands.run('xdotool mousemove 10 10', { envs: { DISPLAY: ':0' } })
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2)
    await page.mouse.move(box.x + box.width / 2 + 5, box.y + box.height / 2 + 5)
    assert.match(await mouse(), /^x:10 y:10 /, 'a view-only screen moved the pointer')

    await page.getByRole('button', { name: 'Take control' }).click()
    await page.getByRole('status').filter({ hasText: 'you control it' }).waitFor()
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2)
    await page.mouse.move(box.x + box.width / 2 + 5, box.y + box.height / 2 + 5)
    await waitFor(async () => !/^x:10 y:10 /.test(await mouse()), { what: 'the pointer to follow the screen once in control' })
    await page.locator('.screen-wrap').evaluate((el) => el.scrollIntoView({ block: 'center' }))
    await shot(page, 'desktop')
    await page.getByRole('button', { name: 'Release control' }).click()
    await page.context().close()
  })

  it('logged no console errors', () => {
    assert.deepEqual(errors, [])
  })
})
