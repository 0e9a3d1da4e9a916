// server.mjs: the server a benchmark runs against (bench/burst, bench/server, bench/template):
// its own `warren serve` (test/e2e/server/harness.mjs: free 127.0.0.1 port, fresh state dir,
// its own container label) with the SDK pointed at it, the e2e tests' npm SDKs, and the removal
// of the containers the benchmark's sandboxes leave.
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { promisify } from 'node:util'
import { WarrenServer } from '../test/e2e/server/harness.mjs'

const require = createRequire(new URL('../test/e2e/package.json', import.meta.url))
const run = promisify(execFile)

/** sdk imports an npm package the e2e tests install (e2b, @e2b/code-interpreter). */
export const sdk = (name) => import(require.resolve(name))

/**
 * startServer starts a server named `name` with warren serve's extra `args` and points the SDK
 * at it through the E2B_* environment, without the SDK's debug mode. Label the sandboxes with
 * the metadata { bench: server.name } for removeSandboxContainers.
 */
export async function startServer({ name, args }) {
  const server = new WarrenServer({ name, args })
  await server.start()
  Object.assign(process.env, server.sdkEnv)
  delete process.env.E2B_DEBUG
  return server
}

/** removeSandboxContainers removes the containers of sandboxes labelled { bench: server.name }. */
export async function removeSandboxContainers(server) {
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=bench=${server.name}`])
  const ids = stdout.split(/\s+/).filter(Boolean)
  if (ids.length) await run('docker', ['rm', '-f', ...ids])
}
