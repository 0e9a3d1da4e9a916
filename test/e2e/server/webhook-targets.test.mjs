// Webhooks are no port scanner: on a server with the default flags, a webhook whose URL is on
// loopback (the server's own port included), link-local (a cloud's metadata service), a private
// range or a name resolving there is refused with 400 in E2B's error shape, naming the rule and
// the operator's flag (--webhook-allow-private, which events.test.mjs sets for its receivers); so
// is an update that points an existing webhook there. Deliveries check the address they connect
// to at every attempt (internal/events' tests, with a name resolving to loopback).
import { it, describe } from 'node:test'
import { useServer } from './harness.mjs'
import { assert } from './helpers.mjs'

const srv = await useServer()

const api = (method, path, body) =>
  fetch(srv.url + path, { method, headers: { 'X-API-Key': srv.apiKey, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) })

async function assertRefused(res, rule) {
  assert.equal(res.status, 400)
  const e = await res.json()
  assert.equal(e.code, 400)
  assert.match(e.message, rule)
  assert.match(e.message, /--webhook-allow-private/)
}

describe('webhook targets', { timeout: 60_000 }, () => {
  it('a URL on loopback, link-local or a private range is refused, naming the rule', async () => {
    const own = new URL(srv.url)
    for (const [url, rule] of [
      [`http://127.0.0.1:${own.port}/sandboxes`, /loopback/],
      ['http://127.0.0.1:1/', /loopback/],
      ['http://[::1]:22/', /loopback/],
      [`http://localhost:${own.port}/`, /loopback/],
      ['http://0.0.0.0:5432/', /unspecified/],
      ['http://169.254.169.254/latest/meta-data/', /link-local/],
      ['http://10.0.0.1/', /private/],
      ['http://172.17.0.1:2375/', /private/],
      ['http://192.168.1.1/', /private/],
    ]) {
      await assertRefused(await api('POST', '/events/webhooks', { url, signatureSecret: 'k' }), rule)
    }
    const list = await (await api('GET', '/events/webhooks')).json()
    assert.deepEqual(list.filter((w) => !w.url.startsWith('http://203.0.113.')), [])
  })

  it('an update cannot point a webhook there either', async () => {
    // A documentation address (TEST-NET-3), disabled: it is never posted to.
    const res = await api('POST', '/events/webhooks', { url: 'http://203.0.113.7/hook', signatureSecret: 'k', enabled: false })
    assert.equal(res.status, 201, await res.clone().text())
    const { id } = await res.json()
    try {
      await assertRefused(await api('PATCH', `/events/webhooks/${id}`, { url: 'http://127.0.0.1:1/' }), /loopback/)
      assert.equal((await (await api('GET', `/events/webhooks/${id}`)).json()).url, 'http://203.0.113.7/hook')
    } finally {
      await api('DELETE', `/events/webhooks/${id}`)
    }
  })
})
