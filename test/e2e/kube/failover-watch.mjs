// What kube/failover.test.mjs watches besides the SDK's calls: a webhook receiver on the host,
// and the instants a deleted replica got its SIGTERM and its kill, as its pod IP shows them.
import http from 'node:http'
import { createHash } from 'node:crypto'
import { sleep } from '../server/helpers.mjs'

/** E2B's documented signature: base64url(sha256(secret + body)) without padding. */
function signatureOf(secret, body) {
  return createHash('sha256').update(secret + body).digest('base64url')
}

/**
 * A webhook endpoint on the host, at an address the control plane's pods reach: it accepts
 * every delivery whose signature checks, keeping each event once by its ID and counting the
 * deliveries of an event it had (delivery is at-least-once: a 2xx whose leader was lost before
 * it recorded it is sent again by the next).
 */
export class Receiver {
  events = new Map() // event ID → the event, as first delivered
  duplicates = 0
  badSignatures = 0

  constructor(secret) {
    this.secret = secret
    this.server = http.createServer((req, res) => {
      let body = ''
      req.on('data', (c) => { body += c })
      req.on('end', () => {
        if (req.headers['e2b-signature'] !== signatureOf(this.secret, body)) {
          this.badSignatures++
          res.writeHead(401).end()
          return
        }
        const ev = JSON.parse(body)
        if (this.events.has(ev.id)) this.duplicates++
        else this.events.set(ev.id, ev)
        res.writeHead(200).end('ok')
      })
    })
  }

  /** Listens on host (port chosen by the system); the webhook's URL. */
  async listen(host) {
    await new Promise((ok, fail) => this.server.once('error', fail).listen(0, host, ok))
    return `http://${host}:${this.server.address().port}/hook`
  }

  close() {
    this.server.close()
    this.server.closeAllConnections()
  }
}

/**
 * Watches a replica's pod IP from before its deletion: GET /health every 50 ms on a kept-alive
 * connection. A draining replica closes its connection with each answer (Connection: close),
 * which a running one does not, and a killed one answers no more: so the SIGTERM fell between
 * the last plain answer and the first draining one, and the kill between the last answer and
 * the first failure that no answer followed. Beside it, a change (the kill of a sandbox that
 * does not exist: 404, nothing done) sent again and again shows when the replica, knowing its
 * pod force-deleted, began to refuse changes (429).
 */
export class KillWatch {
  samples = [] // {start, end, state: 'plain' | 'draining' | 'down'}
  refusals = [] // {start, end, status}: the change's answers (0: none)

  constructor(ip, apiKey) {
    this.ip = ip
    this.apiKey = apiKey
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  }

  change() {
    return new Promise((resolve) => {
      const req = http.request({
        host: this.ip, port: 3000, method: 'DELETE', path: '/sandboxes/failover-watch-none', agent: false, timeout: 300,
        headers: { 'X-API-Key': this.apiKey },
      }, (res) => {
        res.resume()
        resolve(res.statusCode)
      })
      req.on('timeout', () => req.destroy(new Error('timeout')))
      req.on('error', () => resolve(0))
      req.end()
    })
  }

  probe() {
    return new Promise((resolve) => {
      const req = http.get({ host: this.ip, port: 3000, path: '/health', agent: this.agent, timeout: 500 }, (res) => {
        res.resume()
        resolve(res.headers.connection === 'close' ? 'draining' : 'plain')
      })
      req.on('timeout', () => req.destroy(new Error('timeout')))
      req.on('error', () => resolve('down'))
    })
  }

  /** Probes until three failures in a row follow an answer, or 20 s. */
  start() {
    const until = Date.now() + 20_000
    this.done = (async () => {
      let downs = 0
      while (Date.now() < until && !(downs >= 3 && this.samples.some((s) => s.state !== 'down'))) {
        const start = Date.now()
        const state = await this.probe()
        this.samples.push({ start, end: Date.now(), state })
        downs = state === 'down' ? downs + 1 : 0
        await sleep(50)
      }
      this.agent.destroy()
    })()
    this.changes = (async () => {
      while (Date.now() < until && !this.stopped) {
        const start = Date.now()
        const status = await this.change()
        this.refusals.push({ start, end: Date.now(), status })
        await sleep(50)
      }
    })()
  }

  /**
   * Bounds of the SIGTERM→kill window, from the deletion at t0: term no earlier than termLo (the
   * last plain answer's start), the kill no later than killHi (the end of the first failure no
   * answer followed); changes refused by refusedAt (the first 429's end); and when each was
   * first seen, in ms after t0.
   */
  async window(t0) {
    await this.done
    this.stopped = true
    await this.changes
    const refused = this.refusals.find((s) => s.status === 429)
    const after = this.samples.filter((s) => s.end >= t0)
    const answers = after.filter((s) => s.state !== 'down')
    const plain = after.filter((s) => s.state === 'plain').at(-1)
    const drained = after.find((s) => s.state === 'draining')
    const lastAnswer = answers.at(-1)
    const dead = after.find((s) => s.state === 'down' && (!lastAnswer || s.start > lastAnswer.start))
    const termLo = Math.max(t0, plain?.start ?? t0)
    const killHi = dead?.end ?? after.at(-1)?.end ?? Date.now()
    // How the changes sent after the deletion were answered (0: no answer within 300 ms), for a
    // failure's message.
    const changeAnswers = {}
    for (const r of this.refusals.filter((r) => r.start >= t0)) changeAnswers[r.status] = (changeAnswers[r.status] ?? 0) + 1
    return {
      termLo,
      killHi,
      changeAnswers,
      refusedAt: refused?.end,
      drainSeenMs: drained ? drained.end - t0 : null,
      refusedSeenMs: refused ? refused.end - t0 : null,
      killSeenMs: dead ? dead.end - t0 : null,
    }
  }
}
