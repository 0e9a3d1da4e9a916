// The SDK's default URLs: no E2B_SANDBOX_URL, so every data-plane call goes to
// https://<port>-<id>.<domain>:<tls port>, through Warren's HTTPS listener (certificate from
// its own CA) and its DNS server. This file starts a private `warren serve` with --tls-addr
// and --dns-addr, then runs tls-suite.mjs in a child node, because NODE_EXTRA_CA_CERTS is
// read only when node starts, with dns-hook.mjs preloaded so the child resolves *.<domain>
// through Warren's DNS and the system resolver stays as it is.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { useServer, freePort } from './harness.mjs'

const here = dirname(fileURLToPath(import.meta.url))
// A name no resolver knows, so nothing but Warren's DNS can answer for it.
const DOMAIN = 'warren-e2e.test'
const tlsPort = await freePort()
const dnsPort = await freePort() // free for TCP; UDP on the same number is as good as always
const h = await useServer({
  private: true,
  args: ['--domain', DOMAIN, '--tls-addr', `127.0.0.1:${tlsPort}`, '--dns-addr', `127.0.0.1:${dnsPort}`],
})

it('the SDK works over https://<port>-<id>.<domain> with Warren CA and DNS', { timeout: 600_000 }, async () => {
  const env = { ...process.env }
  for (const k of Object.keys(env)) if (k.startsWith('E2B_') || k.startsWith('NODE_TEST')) delete env[k]
  Object.assign(env, {
    E2B_API_URL: h.server.url, // the control plane may stay plain HTTP
    E2B_API_KEY: h.server.apiKey,
    E2B_DOMAIN: `${DOMAIN}:${tlsPort}`, // getHost keeps the port: <port>-<id>.<domain>:<tls port>
    NODE_EXTRA_CA_CERTS: join(h.server.stateDir, 'tls', 'ca.pem'),
    WARREN_E2E_DNS_SERVER: `127.0.0.1:${dnsPort}`,
    WARREN_E2E_DNS_DOMAIN: DOMAIN,
  })
  const child = spawn(process.execPath, ['--import', join(here, 'dns-hook.mjs'), '--test', '--test-reporter=spec', join(here, 'tls-suite.mjs')],
    { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (out += d))
  const code = await new Promise((ok) => child.once('exit', (c, s) => ok(c ?? s)))
  if (process.env.WARREN_E2E_VERBOSE === '1' || code !== 0) console.log(out)
  assert.equal(code, 0, `tls-suite.mjs failed:\n${out}\n--- server log tail\n${await h.server.logTail()}`)
})
