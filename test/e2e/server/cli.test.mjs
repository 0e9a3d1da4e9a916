// The e2b CLI (@e2b/cli) against a running `warren serve`, as a user runs it with E2B_API_URL,
// E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY set: `template create` from a Dockerfile, `template
// list|publish|unpublish|delete`, and `sandbox list|info|exec|logs|metrics|pause|resume|kill`,
// `sandbox snapshot create|list|delete` on a sandbox of that template.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { Sandbox } from 'e2b'
import { useServer } from './harness.mjs'
import { uid } from './helpers.mjs'

await useServer()
const run = promisify(execFile)
const CLI = fileURLToPath(new URL('../node_modules/.bin/e2b', import.meta.url))

/** e2b runs the CLI in dir and resolves its output without colours; a failure shows both streams. */
async function e2b(dir, ...args) {
  try {
    const p = run(CLI, args, { cwd: dir, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' }, timeout: 180_000 })
    p.child.stdin.end() // `sandbox exec` forwards its input to the command until it ends
    return (await p).stdout
  } catch (e) {
    assert.fail(`e2b ${args.join(' ')}: ${e.message}\n${e.stdout}\n${e.stderr}`)
  }
}

describe('the e2b CLI', () => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-cli-'))
  const name = `e2e-cli-${uid()}`
  const mark = uid()
  let sbx

  before(() => {
    writeFileSync(join(dir, 'e2b.Dockerfile'), [
      'FROM warren/base',
      `RUN echo ${mark} > /tmp/mark`,
      'COPY hello.txt /srv/hello.txt',
      'ENV FROM_CLI=yes',
      '',
    ].join('\n'))
    writeFileSync(join(dir, 'hello.txt'), 'hello from the context\n')
  })

  after(async () => {
    await sbx?.kill().catch(() => {})
    await fetch(`${process.env.E2B_API_URL}/templates/${name}`, { method: 'DELETE', headers: { 'X-API-Key': process.env.E2B_API_KEY } })
      .catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  })

  it('template create builds the Dockerfile; template list shows it', async () => {
    const out = await e2b(dir, 'template', 'create', name)
    assert.match(out, new RegExp(`Sandbox.create\\('${name}'\\)`))
    assert.match(await e2b(dir, 'template', 'list'), new RegExp(name))
  })

  it('sandbox list, info, exec, logs and metrics on a sandbox of the template', async () => {
    sbx = await Sandbox.create(name, { timeoutMs: 300_000 })
    const id = sbx.sandboxId
    assert.match(await e2b(dir, 'sandbox', 'list'), new RegExp(`${id}.*${name}.*Running`))
    const info = await e2b(dir, 'sandbox', 'info', id)
    assert.match(info, /State: running/)
    assert.match(info, new RegExp(`Alias: ${name}`))
    assert.equal(await e2b(dir, 'sandbox', 'exec', id, '--', 'sh', '-c', 'cat /tmp/mark /srv/hello.txt; echo $FROM_CLI'),
      `${mark}\nhello from the context\nyes\n`)
    const logs = await e2b(dir, 'sandbox', 'logs', id)
    assert.match(logs, /sandbox created/)
    assert.match(logs, /agent listening/)
    await e2b(dir, 'sandbox', 'metrics', id)
  })

  it('sandbox pause, list --state paused, resume', async () => {
    const id = sbx.sandboxId
    assert.match(await e2b(dir, 'sandbox', 'pause', id), /paused/)
    assert.match(await e2b(dir, 'sandbox', 'list', '--state', 'paused'), new RegExp(`${id}.*Paused`))
    assert.match(await e2b(dir, 'sandbox', 'resume', id), /resumed/)
    assert.equal(await e2b(dir, 'sandbox', 'exec', id, '--', 'cat', '/tmp/mark'), `${mark}\n`)
  })

  it('sandbox snapshot create, list and delete; then sandbox kill', async () => {
    const id = sbx.sandboxId
    const created = await e2b(dir, 'sandbox', 'snapshot', 'create', id)
    const snap = created.match(/Created snapshot (\S+)/)?.[1]
    assert.ok(snap, created)
    assert.match(await e2b(dir, 'sandbox', 'snapshot', 'list'), new RegExp(snap))
    assert.match(await e2b(dir, 'sandbox', 'snapshot', 'delete', snap), /deleted/)
    assert.match(await e2b(dir, 'sandbox', 'kill', id), /killed/)
    assert.equal((await Sandbox.getInfo(id).catch((e) => e)).constructor.name, 'SandboxNotFoundError')
  })

  it('template publish, unpublish and delete', async () => {
    await e2b(dir, 'template', 'publish', name, '-y')
    assert.match(await e2b(dir, 'template', 'list'), new RegExp(`Public.*${name}`))
    await e2b(dir, 'template', 'unpublish', name, '-y')
    assert.match(await e2b(dir, 'template', 'list'), new RegExp(`Private.*${name}`))
    await e2b(dir, 'template', 'delete', name, '-y')
    assert.doesNotMatch(await e2b(dir, 'template', 'list'), new RegExp(name))
  })
})
