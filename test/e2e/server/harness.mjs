// harness.mjs: starts and stops real `bin/warren serve` processes for the end-to-end tests.
//
// A WarrenServer runs `warren serve` on a free 127.0.0.1 port with a fresh temporary state
// directory, a generated API key (WARREN_API_KEY) and its own container label value, so it
// never touches (or reconciles away) the containers of another Warren on the same engine.
// It can be killed with SIGKILL and restarted on the same state directory and port.
// With WARREN_STORE set (a postgres:// URL of a database the harness may create others from),
// each server keeps its records in a PostgreSQL database of its own, made at its first start,
// kept across restarts and dropped by dispose(): servers of one run never share state.
//
// Used two ways:
//   * as a module by the test files: useServer() gives a test file a server — the shared one
//     started by `node harness.mjs run` (env WARREN_E2E_SHARED=1), or a private one when the
//     file runs on its own (`node --test server/x.test.mjs`) or needs to kill its server;
//   * as a command by server-run.sh:  node server/harness.mjs run -- node --test ...
//     starts the shared server, runs the command with E2B_API_URL, E2B_SANDBOX_URL,
//     E2B_DOMAIN and E2B_API_KEY set, then removes every sandbox, snapshot and container the
//     server made and stops it, whatever the outcome; exits with the command's status.
//
// Every server started in one run writes `<name>.pid`, `<name>.label` (and `<name>.database`
// under WARREN_STORE) to WARREN_E2E_RUN_DIR (when set), so server-run.sh can finish off what a
// crashed test process left behind.
import { spawn, execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, rm, writeFile, readFile, mkdir, appendFile } from 'node:fs/promises'
import { openSync, closeSync, existsSync, unlinkSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const here = dirname(fileURLToPath(import.meta.url))
export const REPO = resolve(here, '../../..')
export const WARREN_BIN = process.env.WARREN_BIN || join(REPO, 'bin/warren')
export const AGENT_BIN = process.env.WARREN_AGENT_BIN || join(REPO, 'bin/warren-agent')
/** The container label every Warren container carries; its value names the server. */
export const LABEL_MANAGED = 'dev.warren.managed'
/** Sandbox domain the test servers use: getHost(port) is <port>-<id>.<DOMAIN>. */
export const DOMAIN = process.env.WARREN_E2E_DOMAIN || 'warren.localhost'
/** Identifies one test run; every server name (and so container label) starts with it. */
export const RUN_ID = (process.env.WARREN_E2E_RUN_ID ||= randomBytes(4).toString('hex'))

const run = promisify(execFile)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** An API key in the shape every SDK 2.x accepts: e2b_ + 40 hex digits. */
export function newApiKey() {
  return `e2b_${randomBytes(20).toString('hex')}`
}

/** A free TCP port on 127.0.0.1 (free when asked; the server binds it right after). */
export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer()
    s.unref()
    s.on('error', fail)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => ok(port))
    })
  })
}

const live = new Set() // servers of this process, SIGKILLed if the process exits abruptly
process.on('exit', () => {
  for (const s of live) s.proc?.kill('SIGKILL')
})

export class WarrenServer {
  /**
   * @param {object} [opts]
   * @param {string} [opts.name]   label value and log name; default warren-e2e-<run>-<rand>
   * @param {string} [opts.apiKey] default a fresh e2b_ key
   * @param {string[]} [opts.args] extra `warren serve` arguments
   * @param {object} [opts.env]    extra environment for the server
   * @param {string} [opts.bin]    the warren binary; default WARREN_BIN
   * @param {string} [opts.agentBin] the agent binary; default AGENT_BIN
   */
  constructor(opts = {}) {
    this.name = opts.name ?? `warren-e2e-${RUN_ID}-${randomBytes(3).toString('hex')}`
    this.apiKey = opts.apiKey ?? newApiKey()
    this.domain = opts.domain ?? DOMAIN
    this.args = opts.args ?? []
    this.extraEnv = opts.env ?? {}
    this.bin = opts.bin ?? WARREN_BIN
    this.agentBin = opts.agentBin ?? AGENT_BIN
    this.proc = undefined
    this.port = undefined
    this.dir = undefined
    this.database = undefined // its PostgreSQL database under WARREN_STORE, made on first start
  }

  get url() {
    return `http://127.0.0.1:${this.port}`
  }

  get stateDir() {
    return join(this.dir, 'state')
  }

  get logPath() {
    return join(this.dir, 'server.log')
  }

  /**
   * The flags naming this server's store, for `warren serve`, `warren keys` and
   * `warren dashboard` alike: its state dir, and under WARREN_STORE its own database.
   */
  get storeFlags() {
    const flags = ['--state-dir', this.stateDir]
    if (this.database) flags.push('--store', storeURL(this.database))
    return flags
  }

  /** What an SDK user sets to talk to this server. */
  get sdkEnv() {
    return {
      E2B_API_URL: this.url,
      E2B_SANDBOX_URL: this.url,
      E2B_DOMAIN: this.domain,
      E2B_API_KEY: this.apiKey,
    }
  }

  /** Starts the server (the first time on a fresh state dir and port; later on the same). */
  async start() {
    if (this.proc) throw new Error(`${this.name} is already running`)
    for (const bin of [this.bin, this.agentBin]) {
      if (!existsSync(bin)) throw new Error(`${bin} is missing: run scripts/build.sh`)
    }
    this.dir ??= await mkdtemp(join(tmpdir(), 'warren-e2e-'))
    this.port ??= await freePort()
    if (process.env.WARREN_STORE && !this.database) {
      this.database = this.name.replaceAll('-', '_')
      await this.#record()
      await psql(`CREATE DATABASE ${this.database}`)
    }
    const log = openSync(this.logPath, 'a')
    const args = [
      'serve',
      '--addr', `127.0.0.1:${this.port}`,
      ...this.storeFlags,
      '--agent', this.agentBin,
      '--domain', this.domain,
      ...this.args,
    ]
    const env = { ...process.env, ...this.extraEnv, WARREN_API_KEY: this.apiKey, WARREN_INSTANCE: this.name }
    for (const k of Object.keys(env)) if (k.startsWith('E2B_')) delete env[k]
    const proc = spawn(this.bin, args, { env, stdio: ['ignore', log, log] })
    closeSync(log)
    this.proc = proc
    live.add(this)
    this.exited = new Promise((ok) => proc.once('exit', (code, signal) => ok({ code, signal })))
    this.exited.then(() => {
      if (this.proc === proc) this.proc = undefined
      live.delete(this)
    })
    await this.#record(proc.pid)
    try {
      await this.#waitHealthy(proc)
    } catch (e) {
      proc.kill('SIGKILL')
      throw new Error(`${e.message}\n--- ${this.logPath} (tail)\n${await this.logTail()}`)
    }
    return this
  }

  async #record(pid) {
    const dir = process.env.WARREN_E2E_RUN_DIR
    if (!dir) return
    await mkdir(dir, { recursive: true })
    if (pid) await writeFile(join(dir, `${this.name}.pid`), `${pid}\n`)
    await writeFile(join(dir, `${this.name}.label`), `${this.name}\n`)
    await writeFile(join(dir, `${this.name}.dir`), `${this.dir}\n`)
    if (this.database) await writeFile(join(dir, `${this.name}.database`), `${this.database}\n`)
  }

  async #waitHealthy(proc, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs
    let exited = false
    proc.once('exit', () => (exited = true))
    for (;;) {
      if (exited) throw new Error(`warren serve (${this.name}) exited before answering /health`)
      try {
        const r = await fetch(`${this.url}/health`, { signal: AbortSignal.timeout(1000) })
        if (r.status >= 200 && r.status < 300) return
      } catch {}
      if (Date.now() > deadline) throw new Error(`warren serve (${this.name}) did not answer /health within ${timeoutMs} ms`)
      await sleep(100)
    }
  }

  /** SIGKILL: the server gets no chance to clean up (containers keep running). */
  async kill9() {
    const p = this.proc
    if (!p) return
    p.kill('SIGKILL')
    await this.exited
  }

  /** SIGTERM, then SIGKILL after graceMs. */
  async stop(graceMs = 15_000) {
    const p = this.proc
    if (!p) return
    p.kill('SIGTERM')
    const t = setTimeout(() => p.kill('SIGKILL'), graceMs)
    await this.exited
    clearTimeout(t)
  }

  /** An authenticated request to the control plane; returns the fetch Response. */
  api(path, init = {}) {
    return fetch(`${this.url}${path}`, {
      ...init,
      headers: { 'X-API-KEY': this.apiKey, 'Content-Type': 'application/json', ...init.headers },
      signal: init.signal ?? AbortSignal.timeout(60_000),
    })
  }

  /**
   * Removes what the tests left: every sandbox (running or paused), template and snapshot the
   * server still knows, through its API, when it is running. Errors are collected, not thrown.
   */
  async purge() {
    const problems = []
    if (!this.proc) return problems
    try {
      for (let round = 0; ; round++) {
        if (round === 20) throw new Error('sandboxes are still listed after 20 rounds of DELETE')
        const r = await this.api('/v2/sandboxes?limit=100')
        if (!r.ok) throw new Error(`GET /v2/sandboxes: ${r.status} ${await r.text()}`)
        const list = await r.json()
        if (list.length === 0) break
        for (const s of list) {
          const d = await this.api(`/sandboxes/${s.sandboxID}`, { method: 'DELETE' })
          if (d.status !== 204 && d.status !== 404) problems.push(`DELETE /sandboxes/${s.sandboxID}: ${d.status}`)
        }
        if (problems.length) break
      }
      const t = await this.api('/templates')
      if (t.ok) {
        for (const tpl of await t.json()) {
          const d = await this.api(`/templates/${tpl.templateID}`, { method: 'DELETE' })
          if (d.status !== 204 && d.status !== 404) problems.push(`DELETE /templates/${tpl.templateID}: ${d.status}`)
        }
      }
      const r = await this.api('/snapshots?limit=100')
      if (r.ok) {
        for (const sn of await r.json()) {
          const d = await this.api(`/templates/${encodeURIComponent(sn.snapshotID)}`, { method: 'DELETE' })
          if (d.status !== 204 && d.status !== 404) problems.push(`DELETE /templates/${sn.snapshotID}: ${d.status}`)
        }
      }
    } catch (e) {
      problems.push(`purge: ${e.message}`)
    }
    return problems
  }

  /** Removes every container labelled as this server's (whatever state the server is in). */
  async removeContainers() {
    return removeLabelled(this.name)
  }

  /** Stops the server and removes all it made; keeps the temp dir when WARREN_E2E_KEEP=1. */
  async dispose() {
    const problems = await this.purge()
    await this.stop()
    const left = await this.removeContainers()
    // After a clean stop only warm-pool containers should remain (the server keeps them for its
    // next start); they are removed here like anything else labelled with this server's name.
    if (left.length) problems.push(`removed ${left.length} container(s) left after the server stopped (warm pool?): ${left.join(' ')}`)
    // A server that stops with sandboxes live keeps its chains, so that they stay isolated until
    // it starts again; with their containers removed above, the chains' rules would refuse the
    // sandboxes of later servers that the engine gives the same addresses.
    const chains = await removeChains(this.name)
    if (chains.length) problems.push(`removed firewall chains left after the server stopped: ${chains.join(' ')}`)
    if (this.database) {
      try {
        await psql(`DROP DATABASE IF EXISTS ${this.database} WITH (FORCE)`)
      } catch (e) {
        problems.push(`drop database ${this.database}: ${e.message}`)
      }
    }
    const dir = process.env.WARREN_E2E_RUN_DIR
    if (dir) for (const ext of ['pid', 'label', 'dir', 'database']) rmQuiet(join(dir, `${this.name}.${ext}`))
    if (this.dir && process.env.WARREN_E2E_KEEP !== '1') {
      await unmountUnder(this.dir)
      await rm(this.dir, { recursive: true, force: true })
    }
    return problems
  }

  async logTail(lines = 40) {
    try {
      return (await readFile(this.logPath, 'utf8')).split('\n').slice(-lines).join('\n')
    } catch {
      return '(no log)'
    }
  }

  /** The last `lines` lines of the log at level ERROR (a request that failed with a 500 logs its cause there). */
  async logErrors(lines = 20) {
    const all = await readFile(this.logPath, 'utf8').catch(() => '')
    return all.split('\n').filter((l) => l.includes('"level":"ERROR"')).slice(-lines)
  }
}

/**
 * Removes the firewall chains of the Warren server instance `name` (WRN-<bridge>-<tag>-*, the
 * tag from the instance's SHA-256) and the jumps to them, from every table; returns their names.
 * Does nothing where iptables is missing (the Kubernetes engine's servers have no firewall).
 */
export async function removeChains(name) {
  const tag = createHash('sha256').update(name).digest('hex').slice(0, 6)
  const ours = new RegExp(`^WRN-.+-${tag}-[A-Z]$`)
  const removed = []
  for (const cmd of ['iptables', 'ip6tables']) {
    let saved
    try {
      saved = (await run(`${cmd}-save`, [])).stdout
    } catch {
      continue
    }
    let table = ''
    const jumps = [], chains = []
    for (const line of saved.split('\n')) {
      if (line.startsWith('*')) table = line.slice(1)
      else if (line.startsWith(':') && ours.test(line.slice(1).split(' ')[0])) chains.push([table, line.slice(1).split(' ')[0]])
      else if (line.startsWith('-A ')) {
        const m = line.match(/ -j (\S+)/)
        if (m && ours.test(m[1]) && !ours.test(line.split(' ')[1])) jumps.push([table, line.slice(3)])
      }
    }
    for (const [t, rule] of jumps) {
      // iptables-save quotes comments; the shell splits them back into one argument.
      await run('sh', ['-c', `${cmd} -t ${t} -D ${rule}`]).catch(() => {})
    }
    for (const [t, chain] of chains) {
      await run(cmd, ['-t', t, '-F', chain]).catch(() => {})
      await run(cmd, ['-t', t, '-X', chain]).catch(() => {})
      removed.push(`${cmd}:${t}:${chain}`)
    }
  }
  return removed
}

function rmQuiet(p) {
  try {
    unlinkSync(p)
  } catch {}
}

/**
 * Removes the containers whose LABEL_MANAGED value is `value` (the pods, on the Kubernetes
 * engine: kube-run.sh sets WARREN_ENGINE and the admin's WARREN_E2E_KUBECTL_CONFIG); returns
 * their IDs.
 */
export async function removeLabelled(value) {
  if (process.env.WARREN_ENGINE === 'kubernetes') {
    const env = { ...process.env, KUBECONFIG: process.env.WARREN_E2E_KUBECTL_CONFIG }
    const k = (...a) => run(process.env.WARREN_E2E_KUBECTL || 'kubectl', ['-n', process.env.WARREN_NAMESPACE || 'warren', ...a], { env })
    const { stdout } = await k('get', 'pods', '-l', `${LABEL_MANAGED}=${value}`, '-o', 'name')
    const names = stdout.split(/\s+/).filter(Boolean)
    if (names.length) await k('delete', '--grace-period=0', '--force', '--wait=false', ...names).catch(() => {})
    return names
  }
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=${LABEL_MANAGED}=${value}`])
  const ids = stdout.split(/\s+/).filter(Boolean)
  if (ids.length) await run('docker', ['rm', '-f', '-v', ...ids]).catch(() => {})
  return ids
}

/**
 * The URL of the database named db on the PostgreSQL server of WARREN_STORE (the URL of a
 * database there the harness may create others from, e.g. scripts/ensure-postgres.sh's).
 */
function storeURL(db) {
  const u = new URL(process.env.WARREN_STORE)
  u.pathname = `/${db}`
  return u.toString()
}

/** Runs one SQL statement on WARREN_STORE's database, with psql. */
async function psql(sql) {
  await run('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', process.env.WARREN_STORE, '-c', sql], { timeout: 60_000 })
}

/**
 * Fails at once when the Docker engine does not answer within 30 s, so that a wedged engine
 * fails each test file quickly instead of making every test wait out its own timeouts.
 */
export async function engineAnswers() {
  try {
    await run('docker', ['version', '--format', '{{.Server.Version}}'], { timeout: 30_000 })
  } catch (e) {
    throw new Error(`the Docker engine (${process.env.DOCKER_HOST || 'default socket'}) does not answer: ${e.message}`)
  }
}

/**
 * Gives the calling test file a server and points the SDK at it (process.env). Returns a
 * handle whose `server` is the WarrenServer when it is private to this file (so the file may
 * kill and restart it), undefined for the shared one. With `private: true` the file always
 * gets its own server. Must be called at the top level of a test file (it registers hooks).
 */
export async function useServer({ private: own = false, args, env } = {}) {
  const { before, after, afterEach } = await import('node:test')
  const handle = { server: undefined, apiKey: process.env.E2B_API_KEY, url: process.env.E2B_API_URL }
  before(engineAnswers)
  if (process.env.WARREN_E2E_SHARED === '1' && !own) return handle
  const server = new WarrenServer({ args, env })
  handle.server = server
  before(async () => {
    await server.start()
    Object.assign(process.env, server.sdkEnv)
    delete process.env.E2B_DEBUG
    handle.apiKey = server.apiKey
    handle.url = server.url
  })
  // A failed test's cause may be only in the server's log, which dispose removes: print its end.
  let failed = false
  afterEach((t) => {
    failed ||= !t.passed
  })
  after(async () => {
    await reportErrors(server)
    if (failed) console.error(`harness: ${server.name}: a test failed; the end of its log (${server.logPath}):\n${await server.logTail(80)}`)
    const problems = await server.dispose()
    if (problems.length) console.error(`harness: ${server.name}: ${problems.join('; ')}`)
  })
  return handle
}

/**
 * Prints the ERROR lines of server's log, and adds them, shortened, to WARREN_E2E_RUN_DIR/errors,
 * which server-run.sh prints beside the failed tests: a 500's cause is only in the log.
 */
async function reportErrors(server) {
  const errors = await server.logErrors()
  if (!errors.length) return
  console.error(`harness: ${server.name}: errors in its log (${server.logPath}):\n${errors.join('\n')}`)
  const dir = process.env.WARREN_E2E_RUN_DIR
  if (!dir) return
  const short = errors.map((l) => {
    try {
      const j = JSON.parse(l)
      return `${server.name}: ${j.msg}${j.path ? ` ${j.method} ${j.path}` : ''}: ${j.err ?? ''}`
    } catch {
      return `${server.name}: ${l}`
    }
  })
  await appendFile(join(dir, 'errors'), short.join('\n') + '\n')
}

// ---- command line: node harness.mjs run -- <command...> ----------------------------------

async function main(argv) {
  const sep = argv.indexOf('--')
  if (argv[0] !== 'run' || sep < 0 || sep === argv.length - 1) {
    console.error('usage: node harness.mjs run -- <command> [args...]')
    return 2
  }
  const cmd = argv.slice(sep + 1)
  const server = new WarrenServer({ name: `warren-e2e-${RUN_ID}-shared` })
  const say = (m) => console.error(`harness: ${m}`)
  try {
    await server.start()
  } catch (e) {
    say(e.message)
    await server.dispose().catch(() => {})
    return 1
  }
  const store = server.database ? `, PostgreSQL database ${server.database}` : ''
  say(`warren serve ${server.name} on ${server.url} (state ${server.stateDir}${store}, log ${server.logPath})`)
  const env = { ...process.env, ...server.sdkEnv, WARREN_E2E_SHARED: '1' }
  delete env.E2B_DEBUG
  delete env.E2B_ACCESS_TOKEN
  const child = spawn(cmd[0], cmd.slice(1), { env, stdio: 'inherit' })
  const forward = (sig) => child.kill(sig)
  process.on('SIGINT', forward)
  process.on('SIGTERM', forward)
  const { code, signal } = await new Promise((ok) => child.once('exit', (code, signal) => ok({ code, signal })))
  const status = code ?? (signal ? 128 + 1 : 1)
  if (status !== 0 || process.env.WARREN_E2E_SHOW_LOG === '1') {
    await reportErrors(server)
    say(`server log tail (${server.logPath}):\n${await server.logTail(60)}`)
  }
  if (!server.proc) say('the shared server is not running any more (it crashed?)')
  const problems = await server.dispose()
  for (const p of problems) say(p)
  return status
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2))
}

/**
 * Unmounts what is mounted under dir: a server run with --volume-size-mb leaves its volumes'
 * filesystems mounted when it stops (sandboxes outlive the server), and a test may leave a volume.
 */
async function unmountUnder(dir) {
  const mounts = await readFile('/proc/self/mounts', 'utf8').catch(() => '')
  const unescape = (p) => p.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)))
  for (const line of mounts.split('\n')) {
    const target = unescape(line.split(' ')[1] ?? '')
    if (target.startsWith(dir + '/')) await promisify(execFile)('umount', ['-l', target]).catch(() => {})
  }
}
