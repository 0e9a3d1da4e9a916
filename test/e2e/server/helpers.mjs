// Shared helpers for the server end-to-end tests: the SDK versions under test, a per-suite
// tracker that kills every sandbox a test created, and plain-HTTP access to the data plane the
// way a user without the SDK reaches it (E2b-Sandbox-Id/-Port headers, or a <port>-<id>.<domain>
// Host header).
import { describe, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { loadSdks, sleep, uid } from '../common.mjs'
import { REPO } from './harness.mjs'

export { rejectsWith, sleep, uid } from '../common.mjs'

export const SDKS = await loadSdks()

/**
 * describeEachSdk declares `title` once per SDK version; body(ctx) gets ctx = { sdk, version,
 * is219, tag, create(templateOrOpts, opts), track(sbx) }. create() adds metadata
 * {e2e: <tag>} (plus the caller's) and tracks the sandbox; every tracked sandbox is killed after
 * the suite, whatever happened.
 */
export function describeEachSdk(title, body, opts = {}) {
  for (const [version, sdk] of SDKS) {
    describe(`${title} [${version}]`, opts, () => {
      const ctx = {
        sdk,
        version,
        is219: version.endsWith('2.19'),
        tag: `e2e-${uid()}`,
        ids: new Set(),
        track(sbxOrId) {
          ctx.ids.add(typeof sbxOrId === 'string' ? sbxOrId : sbxOrId.sandboxId)
          return sbxOrId
        },
        async create(template, opts) {
          if (typeof template !== 'string') [template, opts] = ['base', template]
          const o = { ...opts, metadata: { e2e: ctx.tag, ...opts?.metadata } }
          const sbx = await sdk.Sandbox.create(template, o)
          return ctx.track(sbx)
        },
      }
      after(async () => {
        await Promise.all([...ctx.ids].map((id) => sdk.Sandbox.kill(id).catch(() => {})))
      })
      body(ctx)
    })
  }
}

/** Polls fn until it returns a truthy value or timeoutMs passes; returns the value. */
export async function waitFor(fn, { timeoutMs = 10_000, intervalMs = 100, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  let last
  for (;;) {
    try {
      last = await fn()
      if (last) return last
    } catch (e) {
      last = e
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last?.message ?? JSON.stringify(last)})`)
    }
    await sleep(intervalMs)
  }
}

/**
 * fetch through the data plane with routing headers, as E2B_SANDBOX_URL users do:
 * `${E2B_SANDBOX_URL}${path}` with E2b-Sandbox-Id and E2b-Sandbox-Port.
 */
export function proxyFetch(sandboxId, port, path = '/', init = {}) {
  return fetch(`${process.env.E2B_SANDBOX_URL}${path}`, {
    ...init,
    headers: { 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': String(port), ...init.headers },
    signal: init.signal ?? AbortSignal.timeout(30_000),
  })
}

/**
 * A plain HTTP request to the server with an explicit Host header (`<port>-<id>.<domain>`, as
 * from sbx.getHost(port)), i.e. host routing without DNS. Resolves { status, headers, body }.
 */
export function hostRequest(host, path = '/', { method = 'GET', headers = {}, body } = {}) {
  const base = new URL(process.env.E2B_SANDBOX_URL)
  return new Promise((ok, fail) => {
    const req = http.request(
      { host: base.hostname, port: base.port, method, path, headers: { ...headers, Host: host }, timeout: 30_000 },
      (res) => {
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () => ok({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }))
        res.on('error', fail)
      },
    )
    req.on('timeout', () => req.destroy(new Error('request timed out')))
    req.on('error', fail)
    req.end(body)
  })
}

/** Collects every item of an SDK paginator. */
export async function listAll(paginator) {
  const out = []
  while (paginator.hasNext) out.push(...(await paginator.nextItems()))
  return out
}

/** IDs of the sandboxes listed with metadata {e2e: tag} (and optional states). */
export async function listTagged(sdk, tag, state) {
  const query = { metadata: { e2e: tag } }
  if (state) query.state = state
  return (await listAll(sdk.Sandbox.list({ query }))).map((s) => s.sandboxId).sort()
}

/** Starts `python3 -m http.server <port>` serving `dir` in the background; returns the handle. */
export async function startHttpServer(sbx, port, dir, files = {}) {
  for (const [name, content] of Object.entries(files)) await sbx.files.write(`${dir}/${name}`, content)
  const h = await sbx.commands.run(`python3 -m http.server ${port} --bind 0.0.0.0`, { background: true, cwd: dir, timeoutMs: 0 })
  await waitFor(
    async () => (await sbx.commands.run(`python3 - <<'EOF'\nimport socket\ns=socket.socket()\ns.settimeout(1)\ns.connect(('127.0.0.1',${port}))\nEOF`).catch(() => null))?.exitCode === 0,
    { timeoutMs: 20_000, intervalMs: 200, what: `the http server on port ${port} to listen` },
  )
  return h
}

/**
 * Whether tests may restart the Docker engine: it stops every container on the main engine, so
 * only in CI (CI=true, unless WARREN_E2E_RESTART_DOCKERD=0) or with WARREN_E2E_RESTART_DOCKERD=1.
 */
export const dockerd = process.env.WARREN_E2E_RESTART_DOCKERD === '1' ||
  (!!process.env.CI && process.env.CI !== 'false' && process.env.WARREN_E2E_RESTART_DOCKERD !== '0')

/**
 * Stops dockerd (SIGTERM, as a service manager would) and starts it the way scripts/ensure-docker.sh
 * does; on the gVisor test engine (DOCKER_HOST at /run/warren-gvisor), with scripts/setup-gvisor.sh.
 * It waits first for a moment when the engine starts no container (engineQuiet).
 */
export async function restartDockerd() {
  const run = promisify(execFile)
  await engineQuiet()
  if (process.env.DOCKER_HOST?.includes('/run/warren-gvisor/')) {
    await run(join(REPO, 'scripts/setup-gvisor.sh'), ['restart'], { timeout: 180_000 })
    return
  }
  let pid = (await readFile('/var/run/docker.pid', 'utf8').catch(() => '')).trim()
  if (!pid) pid = (await run('pidof', ['dockerd'])).stdout.trim().split(/\s+/)[0]
  assert.ok(pid, 'no dockerd pid found')
  process.kill(Number(pid), 'SIGTERM')
  await waitFor(async () => {
    try {
      process.kill(Number(pid), 0)
      return false
    } catch {
      return true
    }
  }, { timeoutMs: 90_000, intervalMs: 250, what: `dockerd (pid ${pid}) to exit` })
  await run(join(REPO, 'scripts/ensure-docker.sh'), [], { timeout: 120_000 })
}

/**
 * Waits until the engine starts no container: none is being made (state "created") and its
 * containers stay the same for 2 s (the warm pools' refills start containers whenever a claim
 * took one). Docker 20.10 stopped while it starts a container leaves that container running but
 * unknown once restarted (it reattaches only the containers it had recorded as running), on an
 * address it then hands out again, so that the next sandbox there cannot be reached; no API call
 * stops it. An operator restarting the engine under Warren has to pick such a moment too.
 */
async function engineQuiet() {
  const run = promisify(execFile)
  let last
  let since
  await waitFor(async () => {
    const now = (await run('docker', ['ps', '-a', '--no-trunc', '--format', '{{.ID}} {{.State}}'])).stdout.split('\n').sort().join('\n')
    if (now !== last) {
      last = now
      since = Date.now()
      return false
    }
    return !/ created$/m.test(now) && Date.now() - since >= 2_000
  }, { timeoutMs: 60_000, intervalMs: 250, what: 'a moment when the engine starts no container, to restart it without losing one' })
}

/**
 * kubectl in the namespace of the sandboxes' pods, as the cluster's admin, on the Kubernetes
 * engine (test/e2e/kube-run.sh sets WARREN_E2E_KUBECTL and WARREN_E2E_KUBECTL_CONFIG); its stdout.
 */
export async function kubectl(...args) {
  const env = { ...process.env, KUBECONFIG: process.env.WARREN_E2E_KUBECTL_CONFIG }
  const { stdout } = await promisify(execFile)(process.env.WARREN_E2E_KUBECTL || 'kubectl',
    ['-n', process.env.WARREN_NAMESPACE || 'warren', ...args], { env, maxBuffer: 64 << 20 })
  return stdout
}

/**
 * Where a local process reaches a sandbox's agent without the server: the port Docker
 * published on 127.0.0.1, or the pod's IP on the Kubernetes engine.
 */
export async function agentAddr(sandboxId) {
  if (process.env.WARREN_ENGINE === 'kubernetes') {
    return `${(await kubectl('get', 'pod', `warren-${sandboxId}`, '-o', 'jsonpath={.status.podIP}')).trim()}:49983`
  }
  const run = promisify(execFile)
  const { stdout: cid } = await run('docker', ['ps', '-q', '--filter', `label=dev.warren.sandbox=${sandboxId}`])
  const { stdout: published } = await run('docker', ['port', cid.trim(), '49983/tcp'])
  return published.split('\n').find((l) => l.startsWith('127.0.0.1:'))
}

/**
 * The image a sandbox runs, as its engine names it: its Docker container's, or its pod's
 * sandbox container's on the Kubernetes engine; '' when it has none.
 */
export async function sandboxImage(sandboxId) {
  if (process.env.WARREN_ENGINE === 'kubernetes') {
    return (await kubectl('get', 'pod', `warren-${sandboxId}`, '-o', 'jsonpath={.spec.containers[?(@.name=="sandbox")].image}')).trim()
  }
  const { stdout } = await promisify(execFile)('docker', ['ps', '-a', '--filter', `label=dev.warren.sandbox=${sandboxId}`, '--format', '{{.Image}}'])
  return stdout.trim()
}

/** The nodes' containerd sockets on the Kubernetes engine (kube-run.sh sets them), else none. */
const nodeSockets = () => (process.env.WARREN_ENGINE === 'kubernetes' ? (process.env.WARREN_E2E_CONTAINERD || '').split(' ').filter(Boolean) : [])
const ctr = (sock, ...args) => promisify(execFile)(process.env.WARREN_E2E_CTR || 'ctr', ['--address', sock, '-n', 'k8s.io', ...args])
/** ref as containerd names it: "warren/x:1" is "docker.io/warren/x:1". */
const fullName = (ref) => {
  const first = ref.split('/')[0]
  const named = ref.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost') ? ref : `docker.io/${ref.includes('/') ? '' : 'library/'}${ref}`
  return /:[^/]+$/.test(named) ? named : `${named}:latest`
}

/**
 * Whether the engine has image ref anywhere: Docker's engine, and on the Kubernetes engine also
 * any node's containerd.
 */
export async function engineHasImage(ref) {
  if (await promisify(execFile)('docker', ['image', 'inspect', ref]).then(() => true, () => false)) return true
  for (const sock of nodeSockets()) {
    if ((await ctr(sock, 'images', 'ls', '-q')).stdout.split('\n').includes(fullName(ref))) return true
  }
  return false
}

/** Removes image ref wherever engineHasImage looks (a failed test's leftovers). */
export async function removeEngineImage(ref) {
  await promisify(execFile)('docker', ['rmi', '-f', ref]).catch(() => {})
  for (const sock of nodeSockets()) await ctr(sock, 'images', 'rm', fullName(ref)).catch(() => {})
}

export { assert }

/**
 * The figures a volumes e2e prints: create → first command with the volume mounted, n=5 (create
 * makes a sandbox with it and checks it, the timed part; each is killed after), and the content
 * API's write and read MiB/s of 64 MiB at /tp.bin. Resolves { ms (sorted), write, read }.
 */
export async function volumeFigures(vol, create) {
  const ms = []
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now()
    const sbx = await create()
    ms.push(performance.now() - t0)
    await sbx.kill()
  }
  ms.sort((x, y) => x - y)
  const mib = 64
  const chunk = new Uint8Array(1 << 20).fill(7)
  let sent = 0
  const body = new ReadableStream({ pull(ctl) { if (sent >= mib) return ctl.close(); ctl.enqueue(chunk); sent++ } })
  let t0 = performance.now()
  await vol.writeFile('/tp.bin', body)
  const write = mib / ((performance.now() - t0) / 1000)
  t0 = performance.now()
  let got = 0
  for await (const part of await vol.readFile('/tp.bin', { format: 'stream' })) got += part.length
  const read = mib / ((performance.now() - t0) / 1000)
  assert.equal(got, mib << 20)
  return { ms, write, read }
}
