// Failover of the control plane's replicas (docs/kubernetes.md, "High availability"): three
// replicas of control-plane.yaml on one PostgreSQL, reached through their Service, while an SDK
// workload runs (creates, commands, file writes, pauses and resumes, kills, and a long-running
// command's output stream). The test force-deletes the leader's pod, then a follower's, then the
// new leader's, and asserts: a new leader within 15 s each time, no SDK call failing (the SDK's
// own retries count: it has none but a 429's), every sandbox made accounted for (listed and
// usable, or killed by the workload), no pod left without its sandbox. A call cut on a deleted
// pod's own connection (still running at its kill, ~2 s after its SIGTERM, or sent on an idle
// connection as its drain closed it) is the one failure allowed, counted and printed apart: the
// SDK retries no connection error; so is a sandbox listed that the workload never made, one
// for each create so cut (made by the leader the deleted pod forwarded it to). It prints
// the longest gap between lifecycle calls and between commands into a running sandbox.
//
// Runs only under test/e2e/kube-control-plane.sh with WARREN_E2E_CP_REPLICAS=3 (kube-run.sh
// does so), which sets E2B_* to the Service and WARREN_E2E_CP_INSTANCE.
// WARREN_E2E_FAILOVER_SECONDS sets the workload's length (default 60: the three deletions at
// 15, 45 and 70 % of it, a replica replaced and Ready within ~3 s of each).
import { describe, it, before, after } from 'node:test'
import { assert, waitFor, kubectl, listTagged, uid, SDKS } from '../server/helpers.mjs'

const instance = process.env.WARREN_E2E_CP_INSTANCE
const api = process.env.E2B_API_URL
const seconds = Number(process.env.WARREN_E2E_FAILOVER_SECONDS || 60)
const [[, sdk]] = SDKS
const tag = `failover-${uid()}`

before(() => {
  assert.ok(instance && api, 'run this file through test/e2e/kube-control-plane.sh with WARREN_E2E_CP_REPLICAS=3')
})

const replicas = async () => {
  const list = JSON.parse(await kubectl('get', 'pods', '-l', 'app.kubernetes.io/name=warren', '-o', 'json'))
  return list.items.filter((p) => !p.metadata.deletionTimestamp)
}
const leaseSpec = async () => JSON.parse(await kubectl('get', 'lease', 'warren', '-o', 'json').catch(() => '{}')).spec ?? {}
const holder = async () => (await leaseSpec()).holderIdentity
const readyReplicas = async () => (await replicas()).filter((p) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
const forceDelete = (name) => kubectl('delete', 'pod', name, '--grace-period=0', '--force', '--wait=false')

/** What the workload saw: every call's outcome, and the times calls of each kind ended well. */
class Record {
  failures = []
  done = { lifecycle: [], command: [] }
  made = new Set()
  killed = new Set()
  reconnects = 0
  streamGap = 0

  async call(kind, what, fn) {
    const start = Date.now()
    try {
      const out = await fn()
      this.done[kind].push(Date.now())
      return out
    } catch (err) {
      this.failures.push({ what, start, ms: Date.now() - start, at: new Date().toISOString(), err: String(err?.message || err) })
      return undefined
    }
  }

  /** The longest time between two calls of kind ending well, from..to. */
  gap(kind, from, to) {
    const t = [from, ...this.done[kind].sort((a, b) => a - b), to]
    let longest = 0
    for (let i = 1; i < t.length; i++) longest = Math.max(longest, t[i] - t[i - 1])
    return longest
  }
}

/** One worker's round: a sandbox made, used, paused and resumed, then killed or kept. */
async function round(rec, n, keep) {
  const sbx = await rec.call('lifecycle', 'create', () => sdk.Sandbox.create('base', { timeoutMs: 600_000, metadata: { e2e: tag } }))
  if (!sbx) return
  rec.made.add(sbx.sandboxId)
  await rec.call('command', 'run', async () => assert.equal((await sbx.commands.run(`echo round ${n}`)).stdout, `round ${n}\n`))
  // A write cut by a deleted pod's kill (judged with the other failures) leaves nothing to read.
  const wrote = await rec.call('command', 'write', () => sbx.files.write('/home/user/round.txt', `round ${n}`))
  if (n % 2 === 0) {
    await rec.call('lifecycle', 'pause', async () => assert.equal(await sbx.pause(), true))
    const again = await rec.call('lifecycle', 'connect', () => sdk.Sandbox.connect(sbx.sandboxId, { timeoutMs: 600_000 }))
    if (again && wrote) await rec.call('command', 'read after resume', async () => assert.equal(await again.files.read('/home/user/round.txt'), `round ${n}`))
  }
  if (keep) return
  if (await rec.call('lifecycle', 'kill', () => sdk.Sandbox.kill(sbx.sandboxId))) rec.killed.add(sbx.sandboxId)
}

/** Commands into one running sandbox, back to back, until stop. */
async function commands(rec, sbx, stop) {
  while (!stop.done) await rec.call('command', 'run in a running sandbox', () => sbx.commands.run('true'))
}

/**
 * A command printing a line every 200 ms, its output followed; when the stream breaks (the
 * replica that proxied it went: an error, or no line for 5 s), it is connected to again by its
 * PID, and the gap counted.
 */
async function stream(rec, sbx, stop) {
  let last = Date.now()
  const onStdout = () => {
    rec.streamGap = Math.max(rec.streamGap, Date.now() - last)
    last = Date.now()
  }
  const h = await rec.call('command', 'start the stream', () =>
    sbx.commands.run('i=0; while :; do i=$((i+1)); echo $i; sleep 0.2; done', { background: true, onStdout, timeoutMs: 0 }))
  if (!h) return
  let handle = h
  const stalled = async () => {
    while (!stop.done && Date.now() - last < 5000) await new Promise((r) => setTimeout(r, 500))
  }
  while (!stop.done) {
    await Promise.race([handle.wait().catch(() => {}), stop.signal, stalled()])
    if (stop.done) break
    await handle.disconnect().catch(() => {})
    rec.reconnects++
    last = Date.now()
    const again = await rec.call('command', 'reconnect to the stream', () => sbx.commands.connect(h.pid, { onStdout, timeoutMs: 0 }))
    if (again) handle = again
  }
  await handle.disconnect().catch(() => {})
  await sbx.commands.kill(h.pid).catch(() => {})
}

describe('three control-plane replicas on PostgreSQL', () => {
  after(async () => {
    for (const id of await listTagged(sdk, tag).catch(() => [])) await sdk.Sandbox.kill(id).catch(() => {})
  })

  it('elect one leader; all three serve', async () => {
    await waitFor(async () => (await readyReplicas()).length === 3, { timeoutMs: 180_000, what: 'three Ready replicas' })
    await waitFor(async () => {
      const h = await holder()
      return (await replicas()).some((p) => p.metadata.name === h)
    }, { timeoutMs: 30_000, what: 'a leader' })
  })

  it(`fail over three times under an SDK workload (${seconds} s) and lose nothing`, { timeout: (seconds + 300) * 1000 }, async () => {
    const rec = new Record()
    const stop = { done: false }
    stop.signal = new Promise((resolve) => { stop.fire = resolve })
    const start = Date.now()
    const longLived = await sdk.Sandbox.create('base', { timeoutMs: 600_000, metadata: { e2e: tag } })
    rec.made.add(longLived.sandboxId)
    const streamed = await sdk.Sandbox.create('base', { timeoutMs: 600_000, metadata: { e2e: tag } })
    rec.made.add(streamed.sandboxId)
    const workers = [0, 1].map(async (w) => {
      for (let n = w; !stop.done; n += 2) await round(rec, n, n % 20 === 3)
    })
    const background = [commands(rec, longLived, stop), stream(rec, streamed, stop)]

    const failovers = []
    const deletions = []
    const kill = async (which) => {
      const lead = await holder()
      const pods = await replicas()
      const victim = which === 'leader' ? lead : pods.map((p) => p.metadata.name).find((n) => n !== lead)
      const t0 = Date.now()
      deletions.push(t0)
      await forceDelete(victim)
      if (which === 'leader') {
        let lease
        await waitFor(async () => {
          lease = await leaseSpec()
          return lease.holderIdentity && lease.holderIdentity !== victim
        }, { timeoutMs: 60_000, intervalMs: 200, what: `a leader after ${victim}` })
        // From the deletion to the new holder's acquiring the Lease (its own clock: the host's).
        failovers.push({ victim, to: lease.holderIdentity, ms: Date.parse(lease.acquireTime) - t0 })
      } else {
        failovers.push({ victim, follower: true, ms: 0 })
      }
      // The Deployment replaces the pod; the next deletion waits for three Ready replicas.
      await waitFor(async () => (await readyReplicas()).length === 3, { timeoutMs: 180_000, intervalMs: 500, what: 'three Ready replicas again' })
    }
    const until = (t) => new Promise((r) => setTimeout(r, Math.max(0, start + t - Date.now())))
    await until(seconds * 150)
    await kill('leader')
    await until(seconds * 450)
    await kill('follower')
    await until(seconds * 700)
    await kill('leader')
    await until(seconds * 1000)
    stop.done = true
    stop.fire()
    await Promise.all([...workers, ...background])
    const end = Date.now()

    // Every sandbox made: killed by the workload and gone, or listed and usable.
    const listed = new Set(await listTagged(sdk, tag))
    const lost = []
    for (const id of rec.made) {
      if (rec.killed.has(id)) {
        if (listed.has(id)) lost.push(`${id} (killed, still listed)`)
        continue
      }
      if (!listed.has(id)) {
        lost.push(`${id} (not listed)`)
        continue
      }
      const s = await sdk.Sandbox.connect(id).catch((e) => e)
      const out = s instanceof Error ? s : await s.commands.run('echo alive').catch((e) => e)
      if (out instanceof Error || out.stdout !== 'alive\n') lost.push(`${id} (not usable: ${out?.message || out?.stdout})`)
    }
    const unknown = [...listed].filter((id) => !rec.made.has(id))
    for (const id of unknown) await sdk.Sandbox.kill(id).catch(() => {})
    // No pod left without its sandbox: a pod of this instance names a listed sandbox, or is
    // one of the warm pool's not claimed yet (a claimed pod keeps its pool label, and names the
    // sandbox made of it).
    const orphans = async () => {
      const pods = JSON.parse(await kubectl('get', 'pods', '-l', `dev.warren.managed=${instance},dev.warren.sandbox`, '-o', 'json')).items
      const live = new Set(await listTagged(sdk, tag))
      return pods.filter((p) => !p.metadata.deletionTimestamp).map((p) => [p.metadata.labels['dev.warren.sandbox'], p.metadata.labels['dev.warren.pool']])
        .filter(([id, pool]) => !live.has(id) && (!pool || rec.made.has(id))).map(([id]) => id)
    }
    let left = []
    await waitFor(async () => (left = await orphans()).length === 0, { timeoutMs: 60_000, intervalMs: 1000, what: 'no orphaned pod' }).catch(() => {})

    // A force-deleted pod is killed ~2 s after its SIGTERM (the kubelet's floor), and a call in
    // flight on a connection it held then is cut with it: E2B's SDK retries no connection error,
    // and no server can answer on a connection its process lost. The stopping replica drains
    // at the signal (idle connections closed, each answer closing its own) and sends its
    // forwarded calls on, so what is left is a call still running on it at the kill, or one the
    // client sent on an idle connection just as the drain closed it. Only another replica's
    // connections carry calls after that, and none of them is cut: a connection error ending
    // within 4 s of a deletion is the deleted pod's, counted and printed apart; every other
    // failure fails the test.
    const atKill = (f) => /fetch failed|other side closed|ECONNRESET|socket hang up|terminated/i.test(f.err) &&
      deletions.some((t) => f.start + f.ms >= t && f.start + f.ms <= t + 4000)
    const elsewhere = rec.failures.filter((f) => !atKill(f))
    // A create cut so may have made its sandbox (forwarded by the deleted pod to the leader,
    // which went on): listed, and unknown to the workload. As many as such creates, no more.
    const cutCreates = rec.failures.filter((f) => atKill(f) && f.what === 'create').length
    const report = {
      seconds: Math.round((end - start) / 1000),
      failovers,
      calls: { lifecycle: rec.done.lifecycle.length, command: rec.done.command.length },
      longestLifecycleGapMs: rec.gap('lifecycle', start, end),
      longestCommandGapMs: rec.gap('command', start, end),
      longestStreamGapMs: rec.streamGap,
      streamReconnects: rec.reconnects,
      sdkFailures: elsewhere.length,
      sdkCallsCutByADeletedPodsKill: rec.failures.length - elsewhere.length,
      sandboxes: { made: rec.made.size, killed: rec.killed.size, lost: lost.length, unknown: unknown.length },
      orphanedPods: left.length,
    }
    console.log(`failover: ${JSON.stringify(report)}`)
    for (const f of rec.failures) console.log(`failover: SDK call failed: ${JSON.stringify(f)}`)

    for (const f of failovers.filter((f) => !f.follower)) assert.ok(f.ms <= 15_000, `a new leader ${f.ms} ms after ${f.victim} was deleted (want ≤ 15 s)`)
    assert.deepEqual(lost, [], 'sandboxes lost')
    assert.ok(unknown.length <= cutCreates, `sandboxes listed the workload never made: ${unknown.join(', ')} (creates cut at a deleted pod's kill: ${cutCreates})`)
    assert.deepEqual(left, [], 'pods without their sandbox')
    assert.deepEqual(elsewhere, [], 'SDK calls that failed, other than cut by a deleted pod\'s kill')
  })
})
