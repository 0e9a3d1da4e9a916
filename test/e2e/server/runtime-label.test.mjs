// A template that needs gVisor: an image labelled dev.warren.runtime=gvisor runs its sandboxes
// under runsc even on a server whose default is runc, and an engine without runsc refuses it with
// a 400 that says how to set gVisor up. Run against the main engine (no runsc: the refusal) and
// the gVisor test engine (runsc: the sandbox runs on gVisor's kernel).
import { it, after } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Sandbox } from 'e2b'
import { useServer } from './harness.mjs'
import { assert, uid } from './helpers.mjs'

const run = promisify(execFile)
await useServer({ private: true, args: ['--runtime', 'runc'] })

const image = `warren-e2e-needs-gvisor:${uid()}`
after(() => run('docker', ['rmi', '-f', image]).catch(() => {}))

/** Builds an image from warren/base carrying only the label. */
async function buildLabelled() {
  const child = execFile('docker', ['build', '-q', '-t', image, '-'])
  child.stdin.end('FROM warren/base\nLABEL dev.warren.runtime=gvisor\n')
  await new Promise((ok, fail) => child.on('exit', (code) => (code === 0 ? ok() : fail(new Error(`docker build exited ${code}`)))))
}

it('an image labelled dev.warren.runtime=gvisor runs under gVisor, or is refused where there is none', { timeout: 120_000 }, async () => {
  await buildLabelled()
  const { stdout } = await run('docker', ['info', '--format', '{{json .Runtimes}}'])
  const hasRunsc = 'runsc' in JSON.parse(stdout)
  if (!hasRunsc) {
    await assert.rejects(Sandbox.create(image), (e) =>
      /needs the gvisor runtime/.test(e.message) && /warren runtime setup gvisor/.test(e.message))
    return
  }
  const sbx = await Sandbox.create(image)
  try {
    const { stdout: rt } = await run('docker', ['inspect', '-f', '{{.HostConfig.Runtime}}', `warren-${sbx.sandboxId}`])
    assert.equal(rt.trim(), 'runsc')
    // gVisor's kernel says who it is; the host's does not.
    const dmesg = await sbx.commands.run('dmesg', { user: 'root' })
    assert.match(dmesg.stdout, /gVisor/)
    // The server's default still applies to images without the label.
    const plain = await Sandbox.create()
    const { stdout: plainRt } = await run('docker', ['inspect', '-f', '{{.HostConfig.Runtime}}', `warren-${plain.sandboxId}`])
    assert.equal(plainRt.trim(), 'runc')
    await plain.kill()
  } finally {
    await sbx.kill()
  }
})
