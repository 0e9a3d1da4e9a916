// The MCP gateway: Sandbox.create({ mcp }) runs `mcp-gateway --config '<json>'` in template
// mcp-gateway, and getMcpUrl() is https://50005-<id>.<domain>/mcp. So this file starts a private
// `warren serve` with its HTTPS listener and DNS server (as tls.test.mjs does) and runs
// mcp-suite.mjs in a child node with NODE_EXTRA_CA_CERTS and dns-hook.mjs, where the official
// MCP TypeScript SDK drives the gateway at exactly that URL. Servers come from local git
// repositories in the template (MCP_GATEWAY_GIT_BASE): nothing is fetched from the internet.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { useServer, freePort } from './harness.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const DOMAIN = 'warren-mcp.test'
const tlsPort = await freePort()
const dnsPort = await freePort()
const h = await useServer({
  private: true,
  args: ['--domain', DOMAIN, '--tls-addr', `127.0.0.1:${tlsPort}`, '--dns-addr', `127.0.0.1:${dnsPort}`],
})

it('Sandbox.create({ mcp }) serves its servers at getMcpUrl() to the MCP SDK', { timeout: 900_000 }, async () => {
  const env = { ...process.env }
  for (const k of Object.keys(env)) if (k.startsWith('E2B_') || k.startsWith('NODE_TEST')) delete env[k]
  Object.assign(env, {
    E2B_API_URL: h.server.url,
    E2B_API_KEY: h.server.apiKey,
    E2B_DOMAIN: `${DOMAIN}:${tlsPort}`,
    NODE_EXTRA_CA_CERTS: join(h.server.stateDir, 'tls', 'ca.pem'),
    WARREN_E2E_DNS_SERVER: `127.0.0.1:${dnsPort}`,
    WARREN_E2E_DNS_DOMAIN: DOMAIN,
    WARREN_E2E_PLAIN_URL: h.server.url,
  })
  const child = spawn(process.execPath, ['--import', join(here, 'dns-hook.mjs'), '--test', '--test-reporter=spec', join(here, 'mcp-suite.mjs')],
    { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (out += d))
  const code = await new Promise((ok) => child.once('exit', (c, s) => ok(c ?? s)))
  if (process.env.WARREN_E2E_VERBOSE === '1' || code !== 0) console.log(out)
  else console.log(out.split('\n').filter((l) => l.includes('tools/call') || l.includes('with 2 servers')).join('\n'))
  assert.equal(code, 0, `mcp-suite.mjs failed:\n${out}\n--- server log tail\n${await h.server.logTail()}`)
})
