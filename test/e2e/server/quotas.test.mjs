// Teams' quotas against a real `warren serve`, through the official SDK: a team at its limit of
// sandboxes is refused with RateLimitError (429 in E2B's shape, naming the limit and the use,
// with Retry-After, which the SDK retries by itself), stopped sandboxes do not count, a resume
// past the limit is refused and leaves the sandbox paused, memory and vCPU limits refuse before
// any container starts, another team is not held, and limits changed with `warren teams set` on
// the running server hold at once. The operator's tools: `warren teams kill` and the drain mode
// (`warren teams drain`: creates refused with 503 and Retry-After, running sandboxes served,
// /health says so). A full server (its sandboxes reserve --server-memory-mb) refuses a create
// with 503 and Retry-After before any container starts.
import { it } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Sandbox, RateLimitError, ServiceBusyError } from 'e2b'
import { useServer, WarrenServer, WARREN_BIN } from './harness.mjs'
import { assert, rejectsWith, uid } from './helpers.mjs'

// No warm pool: a container on the engine is one a create started.
const srv = await useServer({ private: true, args: ['--warm-pool', '0', '--warm-pool-code-interpreter', '0'] })
const run = promisify(execFile)

/** Runs `warren teams ...` on the server's store (and, for kill and drain, the server). */
async function teams(...args) {
  const server = ['kill', 'drain'].includes(args[0]) ? ['--url', srv.url] : []
  const { stdout } = await run(WARREN_BIN, ['teams', ...args, ...srv.server.storeFlags, ...server])
  return stdout
}

/** A new team with its key. */
async function newTeam() {
  const team = `q-${uid()}`
  const { stdout } = await run(WARREN_BIN, ['keys', 'create', '--team', team, ...srv.server.storeFlags])
  return { team, apiKey: stdout.trim() }
}

/** How many containers the server has on the engine. */
async function containers() {
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=dev.warren.managed=${srv.server.name}`])
  return stdout.split('\n').filter(Boolean).length
}

/** A raw create, to see the status and headers the SDK hides. */
function rawCreate(apiKey, url = srv.url) {
  return fetch(`${url}/sandboxes`, { method: 'POST', headers: { 'X-API-Key': apiKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', timeout: 60 }) })
}

it('sandboxes: 429 naming the use with Retry-After; stopped ones free their place; a resume past the quota is refused; a change holds at once', async () => {
  const a = await newTeam()
  const b = await newTeam()
  await teams('set', a.team, '--max-sandboxes', '2')
  const opts = { apiKey: a.apiKey, retries: 0 }
  const one = await Sandbox.create(opts)
  const two = await Sandbox.create(opts)

  await rejectsWith(Sandbox.create(opts), RateLimitError, new RegExp(`team '${a.team}' has 2 of 2 sandboxes running`))
  const res = await rawCreate(a.apiKey)
  assert.equal(res.status, 429)
  assert.equal(res.headers.get('retry-after'), '1')
  assert.deepEqual(await res.json(), { code: 429, message: `team '${a.team}' has 2 of 2 sandboxes running` })

  // Another team is not held by a's quota.
  const other = await Sandbox.create({ apiKey: b.apiKey })
  await other.kill()

  // The SDK retries a 429 that says when (3 times by default): a place freed meanwhile is taken.
  const retried = Sandbox.create({ apiKey: a.apiKey })
  await new Promise((r) => setTimeout(r, 300))
  await two.kill()
  await retried

  // Warren's stop pauses to disk: no memory held, no place taken.
  const stop = await fetch(`${srv.url}/sandboxes/${one.sandboxId}/stop`, { method: 'POST', headers: { 'X-API-Key': a.apiKey } })
  assert.ok(stop.ok, `stop: ${stop.status}`)
  await Sandbox.create(opts)
  await rejectsWith(Sandbox.connect(one.sandboxId, opts), RateLimitError, /has 2 of 2 sandboxes running/)
  assert.equal((await Sandbox.getInfo(one.sandboxId, opts)).state, 'paused')

  await teams('set', a.team, '--max-sandboxes', '3')
  const resumed = await Sandbox.connect(one.sandboxId, opts)
  assert.equal((await resumed.commands.run('echo back')).stdout, 'back\n')
  const shown = await teams('show', a.team)
  assert.match(shown, new RegExp(`${a.team}\\s+3\\s+6\\s+1536`), shown)

  assert.match(await teams('kill', a.team), /killed 3 sandbox/)
  assert.equal((await Sandbox.list({ apiKey: a.apiKey }).nextItems()).length, 0)
})

it('memory and vCPU quotas refuse before any container starts', async () => {
  const a = await newTeam()
  await teams('set', a.team, '--max-memory-mb', '256')
  const before = await containers()
  await rejectsWith(Sandbox.create({ apiKey: a.apiKey, retries: 0 }), RateLimitError,
    new RegExp(`team '${a.team}' uses 0 of 256 MiB of memory, and the sandbox needs 512`))
  await teams('set', a.team, '--max-memory-mb', 'default', '--max-vcpus', '1')
  await rejectsWith(Sandbox.create({ apiKey: a.apiKey, retries: 0 }), RateLimitError, /uses 0 of 1 vCPUs, and the sandbox needs 2/)
  assert.equal(await containers(), before)
})

it('drain: creates refused with 503 and Retry-After, running sandboxes served, /health says so', async () => {
  const sbx = await Sandbox.create()
  assert.match(await teams('drain', 'on'), /draining/)
  try {
    await rejectsWith(Sandbox.create({ retries: 0 }), ServiceBusyError, /draining/)
    const res = await rawCreate(srv.apiKey)
    assert.equal(res.status, 503)
    assert.equal(res.headers.get('retry-after'), '30')
    const health = await fetch(`${srv.url}/health`)
    assert.equal(health.status, 200)
    assert.deepEqual(await health.json(), { status: 'draining', draining: true })
    assert.equal((await sbx.commands.run('echo served')).stdout, 'served\n')
  } finally {
    assert.match(await teams('drain', 'off'), /serving/)
  }
  assert.equal((await fetch(`${srv.url}/health`)).status, 204)
  const after = await Sandbox.create()
  await Promise.all([sbx.kill(), after.kill()])
})

it('a full server: a create past the memory its sandboxes reserve is 503 with Retry-After, before any container starts', async () => {
  // A server of its own whose memory holds one sandbox of 512 MiB, not two.
  const full = new WarrenServer({ args: ['--warm-pool', '0', '--warm-pool-code-interpreter', '0', '--memory-mb', '512', '--server-memory-mb', '1000'] })
  await full.start()
  try {
    const opts = { apiKey: full.apiKey, apiUrl: full.url, sandboxUrl: full.url, domain: full.domain }
    const sbx = await Sandbox.create(opts)
    const label = `label=dev.warren.managed=${full.name}`
    const before = (await run('docker', ['ps', '-aq', '--filter', label])).stdout.split('\n').filter(Boolean).length
    await rejectsWith(Sandbox.create({ ...opts, retries: 0 }), ServiceBusyError,
      /this server is full: its sandboxes reserve 512 of its 1000 MiB of memory, and this one needs 512/)
    const res = await rawCreate(full.apiKey, full.url)
    assert.equal(res.status, 503)
    assert.equal(res.headers.get('retry-after'), '10')
    assert.deepEqual(Object.keys(await res.json()).sort(), ['code', 'message'], "E2B's error shape")
    const after = (await run('docker', ['ps', '-aq', '--filter', label])).stdout.split('\n').filter(Boolean).length
    assert.equal(after, before, 'no container started for the refused creates')
    await sbx.kill()
    const next = await Sandbox.create(opts)
    await next.kill()
  } finally {
    await full.dispose()
  }
})
