// A stdio MCP server with no dependencies (newline-delimited JSON-RPC 2.0), for mcp.test.mjs:
// the gateway clones it from a local git repository and starts it with `node server.mjs`.
// One tool, echo, answers "<ECHO_PREFIX>: <text>" and says whether installCmd ran.
import { createInterface } from 'node:readline'
import { existsSync } from 'node:fs'

const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n')
const tools = [{
  name: 'echo',
  description: 'Echoes its text back',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
}]

createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) return
  const msg = JSON.parse(line)
  if (msg.id === undefined) return // a notification: nothing to answer
  switch (msg.method) {
    case 'initialize':
      return send({ id: msg.id, result: {
        protocolVersion: msg.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: 'mcp-echo', version: '1.0.0' },
      } })
    case 'ping':
      return send({ id: msg.id, result: {} })
    case 'tools/list':
      return send({ id: msg.id, result: { tools } })
    case 'tools/call': {
      if (msg.params.name !== 'echo') return send({ id: msg.id, error: { code: -32602, message: `no tool ${msg.params.name}` } })
      const installed = existsSync('installed.txt') ? 'installed' : 'not installed'
      const text = `${process.env.ECHO_PREFIX ?? 'echo'}: ${msg.params.arguments?.text} (${installed})`
      return send({ id: msg.id, result: { content: [{ type: 'text', text }] } })
    }
    default:
      return send({ id: msg.id, error: { code: -32601, message: `method ${msg.method} not found` } })
  }
})
