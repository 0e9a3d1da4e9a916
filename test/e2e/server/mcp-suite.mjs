// mcp-suite.mjs: run by mcp.test.mjs in a child node with NODE_EXTRA_CA_CERTS, dns-hook.mjs,
// E2B_DOMAIN=<domain>:<tls port> and no E2B_SANDBOX_URL. Not a *.test.mjs file: on its own it
// has no server.
import { it, before } from 'node:test'
import { readFileSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Template } from 'e2b'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { assert, describeEachSdk, uid } from './helpers.mjs'

assert.ok(!process.env.E2B_SANDBOX_URL, 'E2B_SANDBOX_URL must be unset')
const domain = process.env.E2B_DOMAIN
const here = dirname(fileURLToPath(import.meta.url))
const serverB64 = readFileSync(join(here, 'mcp-echo', 'server.mjs')).toString('base64')

// The template: mcp-gateway plus two git repositories holding the echo server in /srv/git, the
// gateway's git base. `pulled` is cloned at build time by addMcpServer (mcp-gateway pull) and
// then removed from /srv/git, so only the pull can have put it in the image.
const tplName = `mcp-e2e-${uid()}`
before(async () => {
  const repos = ['echo', 'pulled'].map((r) => [
    `d=/srv/git/warren-e2e/${r}`,
    'mkdir -p $d',
    `echo ${serverB64} | base64 -d > $d/server.mjs`,
    'git -C $d init -q',
    'git -C $d add .',
    'git -C $d -c user.name=e2e -c user.email=e2e@example.invalid commit -qm init',
  ].join(' && '))
  const t = Template()
    .fromTemplate('mcp-gateway')
    .setEnvs({ MCP_GATEWAY_GIT_BASE: '/srv/git' })
    .runCmd(repos, { user: 'root' })
    .addMcpServer('github/warren-e2e/pulled')
    .runCmd('rm -rf /srv/git/warren-e2e/pulled', { user: 'root' })
  await Template.build(t, tplName)
})

const config = {
  'github/warren-e2e/echo': { installCmd: 'touch installed.txt', runCmd: 'node server.mjs', envs: { ECHO_PREFIX: 'e2e' } },
  'github/warren-e2e/pulled': { runCmd: 'node server.mjs' },
}

async function mcpClient(url, headers) {
  const client = new Client({ name: 'warren-e2e', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }))
  return client
}

describeEachSdk('MCP gateway', (ctx) => {
  it('lists the servers\' tools and calls them through getMcpUrl() with getMcpToken()', async () => {
    const t0 = performance.now()
    const sbx = await ctx.create(tplName, { mcp: config, timeoutMs: 300_000 })
    console.log(`Sandbox.create({ mcp }) with 2 servers [${ctx.version}]: ${(performance.now() - t0).toFixed(0)} ms`)
    const url = sbx.getMcpUrl()
    assert.equal(url, `https://50005-${sbx.sandboxId}.${domain}/mcp`)
    const token = await sbx.getMcpToken()
    assert.ok(token)
    // The token the SDK chose is the one in /etc/mcp-gateway/.token, which a new handle reads.
    const again = await ctx.sdk.Sandbox.connect(sbx.sandboxId)
    assert.equal(await again.getMcpToken(), token)

    const client = await mcpClient(url, { Authorization: `Bearer ${token}` })
    assert.equal(client.getServerVersion().name, 'warren-mcp-gateway')
    const { tools } = await client.listTools()
    assert.deepEqual(tools.map((t) => t.name).sort(), ['echo__echo', 'pulled__echo'])
    assert.deepEqual(tools.find((t) => t.name === 'echo__echo').inputSchema.required, ['text'])

    const r = await client.callTool({ name: 'echo__echo', arguments: { text: 'hi' } })
    assert.deepEqual(r.content, [{ type: 'text', text: 'e2e: hi (installed)' }])
    const p = await client.callTool({ name: 'pulled__echo', arguments: { text: 'ho' } })
    assert.deepEqual(p.content, [{ type: 'text', text: 'echo: ho (not installed)' }])
    await assert.rejects(client.callTool({ name: 'echo', arguments: { text: 'x' } }), /echo/)

    const times = []
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now()
      await client.callTool({ name: 'echo__echo', arguments: { text: String(i) } })
      times.push(performance.now() - t0)
    }
    times.sort((a, b) => a - b)
    console.log(`tools/call over https via Warren [${ctx.version}]: median ${times[10].toFixed(1)} ms, max ${times[19].toFixed(1)} ms`)
    await client.close()

    // Without the token, or with another, the gateway answers 401.
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '0' } } }
    for (const auth of [undefined, 'Bearer wrong']) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(auth && { authorization: auth }) },
        body: JSON.stringify(init),
      })
      assert.equal(res.status, 401, `authorization ${auth}`)
    }

    // On plain HTTP the same endpoint is the sandbox URL with E2B's routing headers.
    const plain = await mcpClient(new URL('/mcp', process.env.WARREN_E2E_PLAIN_URL), {
      Authorization: `Bearer ${token}`, 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '50005',
    })
    const viaPlain = await plain.callTool({ name: 'pulled__echo', arguments: { text: 'plain' } })
    assert.deepEqual(viaPlain.content, [{ type: 'text', text: 'echo: plain (not installed)' }])
    await plain.close()
  })

  it('a config the gateway cannot start fails Sandbox.create with the reason', async () => {
    // e2b 2.51 throws SandboxError('Failed to start MCP gateway: <stderr>'); 2.19 lets the
    // command's CommandExitError through, with the same stderr.
    const fails = (re) => (e) => (ctx.is219 ? e.name === 'CommandExitError' && re.test(e.stderr)
      : e.name === 'SandboxError' && e.message.startsWith('Failed to start MCP gateway: ') && re.test(e.message))
    // No template: the SDK picks mcp-gateway (Sandbox.defaultMcpTemplate).
    await assert.rejects(ctx.sdk.Sandbox.create({ mcp: { brave: {} }, metadata: { e2e: ctx.tag } }),
      fails(/"brave": parameter "apiKey" is required/))
    await assert.rejects(ctx.sdk.Sandbox.create({ mcp: { nosuch: {} }, metadata: { e2e: ctx.tag } }),
      fails(/unknown MCP server "nosuch": this gateway's catalog has brave, /))
    await assert.rejects(ctx.create(tplName, { mcp: { 'github/warren-e2e/echo': { runCmd: 'node missing.mjs' } } }),
      fails(/"github\/warren-e2e\/echo" did not start.*Cannot find module/s))
  })
})
