// Load: 100 sandboxes (WARREN_E2E_LOAD_SANDBOXES) created at once, then killed at once, in two bounded rounds against a
// private `warren serve`. Every create and kill must succeed, no container may be left behind
// (only the warm pool's stay), and the server's memory must not grow from one round to the next.
import { it } from 'node:test'
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { promisify } from 'node:util'
import { Sandbox } from 'e2b'
import { useServer, LABEL_MANAGED } from './harness.mjs'
import { assert, listTagged, uid, waitFor } from './helpers.mjs'

// 100 sandboxes of 512 MiB reserve twice this machine's memory (they use a fraction of it): the
// server's full-server refusal (--server-memory-mb, tested in server/quotas.test.mjs) is off here.
const server = await useServer({ private: true, args: ['--server-memory-mb', '0'] })
const run = promisify(execFile)
// WARREN_E2E_LOAD_SANDBOXES lowers the count where each sandbox costs more (gVisor's Sentry and
// gofer per sandbox on a 2-core CI machine).
const SANDBOXES = Number(process.env.WARREN_E2E_LOAD_SANDBOXES || 100)
const ROUNDS = 2

/** The server's resident memory in MiB, from /proc. */
async function serverRssMiB() {
  const status = await readFile(`/proc/${server.server.proc.pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) / 1024
}

/** The server's containers that are not the warm pool's. */
async function sandboxContainers() {
  const { stdout } = await run('docker', ['ps', '-a', '--filter', `label=${LABEL_MANAGED}=${server.server.name}`,
    '--format', '{{.ID}} {{.Label "dev.warren.pool"}}'])
  return stdout.split('\n').filter((l) => l.trim() && !l.endsWith(' true'))
}

it(`${SANDBOXES} sandboxes created and killed at once, ${ROUNDS} rounds: no failure, no leak, memory stable`, { timeout: 900_000 }, async () => {
  const rss = []
  for (let round = 1; round <= ROUNDS; round++) {
    const tag = `load-${uid()}`
    const created = await Promise.allSettled(Array.from({ length: SANDBOXES }, () =>
      Sandbox.create({ metadata: { e2e: tag }, timeoutMs: 600_000, requestTimeoutMs: 300_000 })))
    const ok = created.filter((r) => r.status === 'fulfilled').map((r) => r.value)
    const errors = created.filter((r) => r.status === 'rejected').map((r) => String(r.reason))
    const killed = await Promise.all(ok.map((s) => s.kill({ requestTimeoutMs: 300_000 }).catch((e) => String(e))))
    assert.deepEqual(errors, [], `round ${round}: every create succeeds`)
    assert.equal(killed.filter((k) => k !== true).length, 0, `round ${round}: every kill succeeds`)
    assert.equal((await listTagged({ Sandbox }, tag)).length, 0, `round ${round}: none is listed after the kills`)
    await waitFor(async () => (await sandboxContainers()).length === 0,
      { timeoutMs: 30_000, intervalMs: 500, what: `round ${round}: no sandbox container left` })
    rss.push(await serverRssMiB())
  }
  console.log(`server RSS after each round: ${rss.map((r) => r.toFixed(1)).join(' MiB, ')} MiB`)
  assert.ok(rss[ROUNDS - 1] - rss[0] < 40, `server memory grows by less than 40 MiB a round: ${rss.join(', ')}`)
})
