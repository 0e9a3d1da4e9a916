// outside.mjs: a stand-in for a machine on the internet, for tests of what sandboxes and template
// builds may reach by name or by address once the neighbours on their own bridge are closed to
// them. It is a network namespace of its own, routed from the host through a veth pair, with an
// HTTP server on port 8080 of each of its addresses that answers every request with "outside".
// The addresses are in 198.18.0.0/15 (RFC 2544, for benchmarks, never routed on the internet),
// or with `{ documentation: true }` in 203.0.113.0/24 (RFC 5737 TEST-NET-3, never routed either:
// sandbox pods on Kubernetes are refused 198.18.0.0/15 by their own rules), and the route to
// them leads into the namespace: nothing leaves the machine. Needs root.
import { spawn, execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import { RUN_ID } from './harness.mjs'

const run = promisify(execFile)

/**
 * Starts the outside host with `count` addresses (1 to 5). `server` replaces its HTTP server with
 * JavaScript of the caller's, run with `env` added to the environment, which prints a line once
 * it serves; `prepare(ips)` runs before it starts.
 * @returns {Promise<{ips: string[], gateway: string, hostIf: string, close: () => Promise<void>}>}
 */
export async function outsideHost(count = 1, { documentation = false, server: code = null, env = {}, prepare = async () => {} } = {}) {
  const id = randomBytes(3).toString('hex')
  const ns = `warren-e2e-${RUN_ID}-out-${id}` // server-run.sh removes what a killed test leaves
  const [hostIf, nsIf] = [`wo${id}h`, `wo${id}n`]
  const [a, b] = randomBytes(2)
  // A /29: the host's address first, then the outside host's.
  const [prefix, first] = documentation ? ['203.0.113', (b & 0x1f) * 8] : [`198.${18 + (a & 1)}.${b}`, 0]
  const gateway = `${prefix}.${first + 1}`
  const ips = Array.from({ length: count }, (_, i) => `${prefix}.${first + i + 2}`)
  const ip = (...args) => run('ip', args)
  let server
  const close = async () => {
    server?.kill('SIGKILL')
    await ip('netns', 'del', ns).catch(() => {}) // takes the veth pair with it
  }
  try {
    await ip('netns', 'add', ns)
    await ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf, 'netns', ns)
    await ip('addr', 'add', `${gateway}/29`, 'dev', hostIf)
    await ip('link', 'set', hostIf, 'up')
    for (const a of ips) await ip('-n', ns, 'addr', 'add', `${a}/29`, 'dev', nsIf)
    await ip('-n', ns, 'link', 'set', nsIf, 'up')
    await ip('-n', ns, 'link', 'set', 'lo', 'up')
    await ip('-n', ns, 'route', 'add', 'default', 'via', gateway)
    await prepare(ips)
    code ??= "require('http').createServer((q, s) => s.end('outside')).listen(8080, '0.0.0.0', () => console.log('ready'))"
    server = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } })
    await new Promise((ok, fail) => {
      server.once('exit', (c) => fail(new Error(`the outside host's server exited (${c})`)))
      server.stdout.once('data', ok)
    })
  } catch (e) {
    await close()
    throw e
  }
  return { ips, gateway, hostIf, close }
}
