// Lifecycle events and webhooks against a private `warren serve` (it is killed with -9), as E2B
// documents them: GET /events/sandboxes[/{id}], /events/webhooks, and deliveries to a receiver on
// 127.0.0.1 that this file runs. The receiver checks every signature the way E2B's docs say,
// fails its first requests (so deliveries are retried), and is down while the server is killed
// (so deliveries wait in the store, and arrive after the restart). Another team sees nothing.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { createHash } from 'node:crypto'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { WARREN_BIN, useServer } from './harness.mjs'
import { uid, waitFor } from './helpers.mjs'

// Webhooks at private addresses allowed: the receivers are on 127.0.0.1 (webhook-targets.test.mjs
// checks that the default refuses them).
const h = await useServer({ private: true, args: ['--webhook-allow-private'] })
const { Sandbox } = await import('e2b')
const run = promisify(execFile)

/** E2B's documented check: base64url(sha256(secret + body)) without padding. */
function signatureOf(secret, body) {
  return createHash('sha256').update(secret + body).digest('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

/** A webhook endpoint on 127.0.0.1: records events, fails on demand, checks signatures. */
class Receiver {
  constructor(secret) {
    this.secret = secret
    this.failNext = 0 // answer 500 to this many more requests
    this.down = false // answer 503 to every request
    this.requests = 0
    this.events = [] // accepted, in arrival order
    this.badSignatures = []
    this.server = http.createServer((req, res) => {
      let body = ''
      req.on('data', (c) => { body += c })
      req.on('end', () => {
        this.requests++
        if (req.headers['e2b-signature'] !== signatureOf(this.secret, body) || req.headers['e2b-signature-version'] !== 'v1' ||
          !req.headers['e2b-webhook-id'] || !req.headers['e2b-delivery-id']) {
          this.badSignatures.push(req.headers)
        }
        if (this.down || this.failNext > 0) {
          if (!this.down) this.failNext--
          res.writeHead(this.down ? 503 : 500).end()
          return
        }
        this.events.push(JSON.parse(body))
        res.writeHead(200).end('ok')
      })
    })
  }

  async listen() {
    await new Promise((ok) => this.server.listen(0, '127.0.0.1', ok))
    return `http://127.0.0.1:${this.server.address().port}/hook`
  }

  of(sandboxId) {
    return this.events.filter((e) => e.sandboxId === sandboxId).map((e) => e.type.replace('sandbox.lifecycle.', ''))
  }
}

const api = (key, method, path, body) =>
  fetch(h.url + path, { method, headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) })

describe('lifecycle events and webhooks', { timeout: 300_000 }, () => {
  const secret = `s3cret-${uid()}`
  const mine = new Receiver(secret)
  const theirs = new Receiver('other')
  let keyB, hookId

  before(async () => {
    keyB = (await run(WARREN_BIN, ['keys', 'create', '--team', 'other', ...h.server.storeFlags])).stdout.trim()
    const res = await api(h.apiKey, 'POST', '/events/webhooks', {
      name: 'e2e', url: await mine.listen(), enabled: true, signatureSecret: secret,
      events: ['sandbox.lifecycle.created', 'sandbox.lifecycle.updated', 'sandbox.lifecycle.paused',
        'sandbox.lifecycle.resumed', 'sandbox.lifecycle.killed'],
    })
    assert.equal(res.status, 201, await res.clone().text())
    const hook = await res.json()
    assert.equal(hook.signatureSecret, undefined)
    hookId = hook.id
    const other = await api(keyB, 'POST', '/events/webhooks', { url: await theirs.listen(), signatureSecret: 'other' })
    assert.equal(other.status, 201)
  })

  after(() => {
    mine.server.close()
    theirs.server.close()
  })

  it('every change is an event, delivered signed, in order, retried after failures; the events API lists them', async () => {
    mine.failNext = 2
    const sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { purpose: 'events' } })
    await sbx.setTimeout(300_000)
    await sbx.pause()
    const back = await Sandbox.connect(sbx.sandboxId)
    await back.kill()

    const want = ['created', 'updated', 'paused', 'resumed', 'killed']
    await waitFor(() => mine.of(sbx.sandboxId).length === want.length, { timeoutMs: 60_000, what: 'five deliveries' })
    assert.deepEqual(mine.of(sbx.sandboxId), want)
    assert.deepEqual(mine.badSignatures, [])
    assert.ok(mine.requests >= want.length + 2, `${mine.requests} requests: the two failures were not retried`)
    const created = mine.events.find((e) => e.sandboxId === sbx.sandboxId && e.type === 'sandbox.lifecycle.created')
    assert.equal(created.version, 'v1')
    assert.equal(created.sandboxTemplateId, 'base')
    assert.equal(created.eventData.sandbox_metadata.purpose, 'events')
    assert.ok(created.sandboxExecutionId && created.sandboxTeamId && created.id)

    const listed = await (await api(h.apiKey, 'GET', `/events/sandboxes/${sbx.sandboxId}?orderAsc=true`)).json()
    assert.deepEqual(listed.map((e) => e.type.replace('sandbox.lifecycle.', '')), want)
    assert.deepEqual(listed.map((e) => e.id), mine.events.filter((e) => e.sandboxId === sbx.sandboxId).map((e) => e.id))
    const newest = await (await api(h.apiKey, 'GET', '/events/sandboxes?limit=1')).json()
    assert.equal(newest.length, 1)
    assert.equal(newest[0].type, 'sandbox.lifecycle.killed')

    // Another team: none of it, through the API or its webhook.
    assert.deepEqual(await (await api(keyB, 'GET', `/events/sandboxes/${sbx.sandboxId}`)).json(), [])
    assert.deepEqual(await (await api(keyB, 'GET', '/events/sandboxes')).json(), [])
    assert.equal((await api(keyB, 'GET', `/events/webhooks/${hookId}`)).status, 404)
    assert.equal(theirs.requests, 0)

    const log = await (await api(h.apiKey, 'GET', `/events/webhooks/${hookId}/deliveries`)).json()
    assert.ok(log.some((d) => d.attempts > 1 && d.status === 'delivered'), JSON.stringify(log))
  })

  it('kill -9 of the server with deliveries waiting: they arrive after the restart', async () => {
    mine.down = true
    const before = mine.requests
    const sbx = await Sandbox.create({ timeoutMs: 120_000 })
    await sbx.kill()
    await waitFor(() => mine.requests > before, { timeoutMs: 30_000, what: 'an attempt against the down receiver' })
    assert.deepEqual(mine.of(sbx.sandboxId), [])
    await h.server.kill9()
    mine.down = false
    await h.server.start()
    await waitFor(() => mine.of(sbx.sandboxId).length === 2, { timeoutMs: 60_000, what: 'both deliveries after the restart' })
    assert.deepEqual(mine.of(sbx.sandboxId), ['created', 'killed'])
    assert.deepEqual(mine.badSignatures, [])
  })

  it('webhooks: PATCH replaces what it names, a disabled one gets nothing, DELETE removes it; bad input is a 400', async () => {
    const patched = await api(h.apiKey, 'PATCH', `/events/webhooks/${hookId}`, { enabled: false })
    assert.equal(patched.status, 200)
    const hook = await patched.json()
    assert.equal(hook.enabled, false)
    assert.equal(hook.events.length, 5)
    const before = mine.requests
    const sbx = await Sandbox.create({ timeoutMs: 60_000 })
    await sbx.kill()
    await new Promise((r) => setTimeout(r, 1500))
    assert.equal(mine.requests, before, 'a disabled webhook got deliveries')

    for (const body of [{ url: 'ftp://127.0.0.1/', signatureSecret: 'k' }, { url: 'http://127.0.0.1/' }, { url: 'http://127.0.0.1/', signatureSecret: 'k', events: ['nope'] }]) {
      const res = await api(h.apiKey, 'POST', '/events/webhooks', body)
      assert.equal(res.status, 400, JSON.stringify(body))
      const e = await res.json()
      assert.equal(e.code, 400)
      assert.ok(e.message)
    }
    assert.equal((await api(h.apiKey, 'GET', '/events/sandboxes?limit=500')).status, 400)
    assert.equal((await api(h.apiKey, 'DELETE', `/events/webhooks/${hookId}`)).status, 200)
    assert.equal((await api(h.apiKey, 'GET', `/events/webhooks/${hookId}`)).status, 404)
    const list = await (await api(h.apiKey, 'GET', '/events/webhooks')).json()
    assert.deepEqual(list, [])
  })
})
