// sandbox.pty: create, sendInput, resize, kill, connect/reconnect.
import { it } from 'node:test'
import { assert, describeEachSdk, rejectsWith, waitFor, uid } from './helpers.mjs'

const T = { timeout: 30_000 }
const enc = (s) => new TextEncoder().encode(s)

/** Collects PTY output as text. */
function collector() {
  const dec = new TextDecoder()
  const c = {
    text: '',
    onData: (d) => {
      c.text += dec.decode(d, { stream: true })
    },
  }
  return c
}

describeEachSdk('pty', (ctx) => {
  it('create runs an interactive shell as "user" with the given envs and TERM', T, async () => {
    const out = collector()
    const h = await ctx.sbx.pty.create({ cols: 80, rows: 24, onData: out.onData, envs: { E2E_PTY: 'pty-env-ok' } })
    ctx.track(h.pid)
    assert.ok(h.pid > 1)
    await ctx.sbx.pty.sendInput(h.pid, enc('echo "V=$E2E_PTY T=$TERM U=$(whoami) D=$(pwd)"\n'))
    await waitFor(() => /V=pty-env-ok T=xterm-256color U=user D=\/home\/user/.test(out.text), {
      what: `pty output, got ${JSON.stringify(out.text.slice(-300))}`,
    })
    await ctx.sbx.pty.sendInput(h.pid, enc('exit 0\n'))
    const r = await h.wait()
    assert.equal(r.exitCode, 0)
  })

  it('sendInput reaches the terminal and the shell exits with its exit code', T, async () => {
    const out = collector()
    const h = await ctx.sbx.pty.create({ cols: 80, rows: 24, onData: out.onData })
    ctx.track(h.pid)
    await ctx.sbx.pty.sendInput(h.pid, enc('printf "%s-%s\\n" abc xyz\n'))
    await waitFor(() => out.text.includes('abc-xyz'), { what: 'printf output' })
    await ctx.sbx.pty.sendInput(h.pid, enc('exit 5\n'))
    const e = await rejectsWith(h.wait(), ctx.sdk.CommandExitError)
    assert.equal(e.exitCode, 5)
  })

  it('the terminal has the size given at create; resize changes tput cols and stty size', T, async () => {
    const out = collector()
    const h = await ctx.sbx.pty.create({ cols: 91, rows: 27, onData: out.onData })
    ctx.track(h.pid)
    await ctx.sbx.pty.sendInput(h.pid, enc('echo "S1=$(stty size)"\n'))
    await waitFor(() => /S1=27 91/.test(out.text), { what: `stty size 27 91 in ${JSON.stringify(out.text.slice(-200))}` })
    await ctx.sbx.pty.resize(h.pid, { cols: 123, rows: 45 })
    await ctx.sbx.pty.sendInput(h.pid, enc('echo "C=$(tput cols) S2=$(stty size)"\n'))
    await waitFor(() => /C=123 S2=45 123/.test(out.text), {
      what: `tput cols 123 in ${JSON.stringify(out.text.slice(-200))}`,
    })
    await ctx.sbx.pty.kill(h.pid)
  })

  it('kill returns true for a running PTY and false once it is gone', T, async () => {
    const h = await ctx.sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
    ctx.track(h.pid)
    assert.equal(await ctx.sbx.pty.kill(h.pid), true)
    await rejectsWith(h.wait(), ctx.sdk.CommandExitError)
    assert.equal(await ctx.sbx.pty.kill(h.pid), false)
    assert.equal(await ctx.sbx.pty.kill(999_999), false)
  })

  it('a PTY is listed by commands.list with bash -i -l', T, async () => {
    const h = await ctx.sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
    ctx.track(h.pid)
    const p = (await ctx.sbx.commands.list()).find((x) => x.pid === h.pid)
    assert.ok(p, 'listed')
    assert.equal(p.cmd, '/bin/bash')
    assert.deepEqual(p.args, ['-i', '-l'])
    await h.kill()
  })

  it('disconnect, then connect receives new output; a second reconnect works too', T, async () => {
    const first = collector()
    const h = await ctx.sbx.pty.create({ cols: 80, rows: 24, onData: first.onData })
    ctx.track(h.pid)
    await h.disconnect()

    const second = collector()
    const c1 = await ctx.sbx.pty.connect(h.pid, { onData: second.onData })
    assert.equal(c1.pid, h.pid)
    const m1 = `M1${uid()}`
    await ctx.sbx.pty.sendInput(h.pid, enc(`echo ${m1.slice(0, 3)}""${m1.slice(3)}\n`))
    await waitFor(() => second.text.includes(m1), { what: 'output after connect' })
    assert.ok(!first.text.includes(m1), 'the disconnected handle gets nothing')
    await c1.disconnect()

    const third = collector()
    const c2 = await ctx.sbx.pty.connect(h.pid, { onData: third.onData })
    const m2 = `M2${uid()}`
    await ctx.sbx.pty.sendInput(h.pid, enc(`echo ${m2.slice(0, 3)}""${m2.slice(3)}\n`))
    await waitFor(() => third.text.includes(m2), { what: 'output after second connect' })
    await ctx.sbx.pty.sendInput(h.pid, enc('exit\n'))
    const r = await c2.wait()
    assert.equal(r.exitCode, 0)
  })

  it('connect to an unknown pid rejects with NotFoundError', T, async () => {
    await rejectsWith(ctx.sbx.pty.connect(999_999, { onData: () => {} }), ctx.sdk.NotFoundError)
  })

  it('sendInput and resize on an unknown pid fail', T, async () => {
    await rejectsWith(ctx.sbx.pty.sendInput(999_999, enc('x')), ctx.sdk.SandboxError)
    await rejectsWith(ctx.sbx.pty.resize(999_999, { cols: 10, rows: 10 }), ctx.sdk.SandboxError)
  })

  it('a PTY as root with a cwd', T, async () => {
    const out = collector()
    const h = await ctx.sbx.pty.create({ cols: 80, rows: 24, onData: out.onData, user: 'root', cwd: '/tmp' })
    ctx.track(h.pid)
    await ctx.sbx.pty.sendInput(h.pid, enc('echo "W=$(whoami):$(pwd)"\n'))
    await waitFor(() => out.text.includes('W=root:/tmp'), { what: `root pty output ${JSON.stringify(out.text.slice(-200))}` })
    await h.kill()
  })
})
