// sandbox.commands: run, background handles, list, connect, kill, stdin, callbacks.
import { it } from 'node:test'
import { assert, describeEachSdk, rejectsWith, waitFor, sleep, uid } from './helpers.mjs'

const T = { timeout: 30_000 }

describeEachSdk('commands', (ctx) => {
  // ---------------------------------------------------------------- run: output
  it('run returns exact stdout, empty stderr and exit code 0', T, async () => {
    const r = await ctx.sbx.commands.run('echo hello')
    assert.equal(r.stdout, 'hello\n')
    assert.equal(r.stderr, '')
    assert.equal(r.exitCode, 0)
  })

  it('run keeps stdout and stderr apart', T, async () => {
    const r = await ctx.sbx.commands.run('echo out; echo err 1>&2; echo out2')
    assert.equal(r.stdout, 'out\nout2\n')
    assert.equal(r.stderr, 'err\n')
  })

  it('run passes special characters through unchanged', T, async () => {
    const text = `!@#$%^&*()_+-=[]{}|;:",.<>?/~\`\\ tab\there`
    const quoted = `'${text.replaceAll("'", `'\\''`)}'`
    const r = await ctx.sbx.commands.run(`printf '%s' ${quoted}`)
    assert.equal(r.stdout, text)
  })

  it('run returns UTF-8 output intact', T, async () => {
    const r = await ctx.sbx.commands.run(`printf 'héllo wörld 世界 🚀'`)
    assert.equal(r.stdout, 'héllo wörld 世界 🚀')
  })

  it('run returns multiline output in order', T, async () => {
    const r = await ctx.sbx.commands.run('for i in 1 2 3 4 5; do echo "line $i"; done')
    assert.equal(r.stdout, 'line 1\nline 2\nline 3\nline 4\nline 5\n')
  })

  it('run returns large output completely (many chunks)', T, async () => {
    const r = await ctx.sbx.commands.run(`head -c 300000 /dev/zero | tr '\\0' a; echo; seq 1 20000 >&2`)
    assert.equal(r.stdout.length, 300001)
    assert.equal(r.stdout, 'a'.repeat(300000) + '\n')
    const lines = r.stderr.trimEnd().split('\n')
    assert.equal(lines.length, 20000)
    assert.equal(lines[0], '1')
    assert.equal(lines[19999], '20000')
  })

  it('run runs a multi-line script', T, async () => {
    const r = await ctx.sbx.commands.run('x=1\nif [ "$x" = 1 ]; then\n  echo yes\nfi')
    assert.equal(r.stdout, 'yes\n')
  })

  it('a non-zero exit rejects with CommandExitError carrying exit code and output', T, async () => {
    const e = await rejectsWith(
      ctx.sbx.commands.run('echo partial; echo boom >&2; exit 3'),
      ctx.sdk.CommandExitError,
    )
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'partial\n')
    assert.equal(e.stderr, 'boom\n')
    assert.ok(e instanceof ctx.sdk.SandboxError)
  })

  it('onStdout and onStderr receive the output as it is produced', T, async () => {
    const out = []
    const err = []
    const r = await ctx.sbx.commands.run('echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c', {
      onStdout: (d) => out.push(d),
      onStderr: (d) => err.push(d),
    })
    assert.equal(out.join(''), 'a\nc\n')
    assert.equal(err.join(''), 'b\n')
    assert.equal(r.stdout, 'a\nc\n')
    assert.ok(out.length >= 2, `expected at least 2 stdout chunks, got ${out.length}`)
  })

  // ---------------------------------------------------------------- run: user, env, cwd
  it('the default user is "user" in /home/user', T, async () => {
    const r = await ctx.sbx.commands.run('whoami; pwd; echo "$HOME"; id -u')
    assert.equal(r.stdout, 'user\n/home/user\n/home/user\n1000\n')
  })

  it('user "root" runs as root with HOME /root, in the default workdir', T, async () => {
    // The default workdir given to /init applies to every user; only HOME differs.
    const r = await ctx.sbx.commands.run('whoami; pwd; echo "$HOME"; id -u', { user: 'root' })
    assert.equal(r.stdout, 'root\n/home/user\n/root\n0\n')
    assert.equal((await ctx.sbx.commands.run('cd && pwd', { user: 'root' })).stdout, '/root\n')
  })

  it('user "user" can sudo without a password', T, async () => {
    const r = await ctx.sbx.commands.run('sudo -n whoami')
    assert.equal(r.stdout, 'root\n')
  })

  it('an unknown user is rejected with AuthenticationError', T, async () => {
    await rejectsWith(
      ctx.sbx.commands.run('whoami', { user: `nosuchuser${uid()}` }),
      ctx.sdk.AuthenticationError,
      /invalid username/,
    )
  })

  it('envs apply to one command and do not leak into the next', T, async () => {
    const r = await ctx.sbx.commands.run('echo "$E2E_FOO|$E2E_BAR"', {
      envs: { E2E_FOO: 'foo value', E2E_BAR: 'b=a;r' },
    })
    assert.equal(r.stdout, 'foo value|b=a;r\n')
    const next = await ctx.sbx.commands.run('echo "[$E2E_FOO]"')
    assert.equal(next.stdout, '[]\n')
    const asRoot = await ctx.sbx.commands.run('echo "[$E2E_FOO]"', { user: 'root' })
    assert.equal(asRoot.stdout, '[]\n')
    const viaSudo = await ctx.sbx.commands.run('sudo -n bash -c \'echo "[$E2E_FOO]"\'')
    assert.equal(viaSudo.stdout, '[]\n')
  })

  it('envs reach programs other than the shell (python)', T, async () => {
    const r = await ctx.sbx.commands.run(`python3 -c 'import os; print(os.environ["E2E_PY"])'`, {
      envs: { E2E_PY: 'from-python' },
    })
    assert.equal(r.stdout, 'from-python\n')
  })

  it('cwd sets the working directory (absolute, relative to home, ~)', T, async () => {
    assert.equal((await ctx.sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n')
    assert.equal((await ctx.sbx.commands.run('pwd', { cwd: ctx.rel })).stdout, `${ctx.dir}\n`)
    assert.equal((await ctx.sbx.commands.run('pwd', { cwd: `~/${ctx.rel}` })).stdout, `${ctx.dir}\n`)
    assert.equal((await ctx.sbx.commands.run('pwd', { cwd: '/', user: 'root' })).stdout, '/\n')
  })

  it('a cwd that does not exist is an error', T, async () => {
    const e = await rejectsWith(
      ctx.sbx.commands.run('pwd', { cwd: `/nonexistent-${uid()}` }),
      ctx.sdk.SandboxError,
    )
    assert.ok(!(e instanceof ctx.sdk.CommandExitError), 'the command must not start')
  })

  // ---------------------------------------------------------------- timeouts
  it('a command within its timeout succeeds', T, async () => {
    const r = await ctx.sbx.commands.run('sleep 0.3; echo ok', { timeoutMs: 10_000 })
    assert.equal(r.stdout, 'ok\n')
  })

  it('a too-short timeout rejects with TimeoutError and the process is killed', T, async () => {
    const mark = `to${uid()}`
    const started = Date.now()
    await rejectsWith(
      ctx.sbx.commands.run(`sleep 20; : ${mark}`, { timeoutMs: 800 }),
      ctx.sdk.TimeoutError,
    )
    assert.ok(Date.now() - started < 10_000, 'should reject near the timeout')
    // The process lifetime is bounded by the timeout on the agent side too.
    await waitFor(
      async () => {
        const r = await ctx.sbx.commands.run(`pgrep -f '[${mark[0]}]${mark.slice(1)}' || true`)
        return r.stdout === ''
      },
      { timeoutMs: 5000, what: 'the timed-out process to be gone' },
    )
  })

  it('a background command with a too-short timeout: wait() rejects with TimeoutError', T, async () => {
    const h = await ctx.sbx.commands.run('sleep 20', { background: true, timeoutMs: 800 })
    ctx.track(h.pid)
    await rejectsWith(h.wait(), ctx.sdk.TimeoutError)
  })

  it('timeoutMs 0 means no timeout for a background command', T, async () => {
    const h = await ctx.sbx.commands.run('sleep 1.2; echo survived', { background: true, timeoutMs: 0 })
    ctx.track(h.pid)
    const r = await h.wait()
    assert.equal(r.stdout, 'survived\n')
  })

  // ---------------------------------------------------------------- background handles
  it('background returns a handle with a pid; wait() returns the result', T, async () => {
    const h = await ctx.sbx.commands.run('sleep 0.5; echo done; echo e >&2', { background: true })
    ctx.track(h.pid)
    assert.ok(Number.isInteger(h.pid) && h.pid > 1, `pid ${h.pid}`)
    assert.equal(h.exitCode, undefined)
    const r = await h.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'done\n')
    assert.equal(r.stderr, 'e\n')
    assert.equal(h.exitCode, 0)
    assert.equal(h.stdout, 'done\n')
  })

  it('background wait() of a failing command rejects with CommandExitError', T, async () => {
    const h = await ctx.sbx.commands.run('exit 7', { background: true })
    const e = await rejectsWith(h.wait(), ctx.sdk.CommandExitError)
    assert.equal(e.exitCode, 7)
  })

  it('handle.kill() kills the process: true, wait() rejects, kill -0 fails', T, async () => {
    const h = await ctx.sbx.commands.run('sleep 60', { background: true })
    ctx.track(h.pid)
    assert.equal(await h.kill(), true)
    const e = await rejectsWith(h.wait(), ctx.sdk.CommandExitError)
    assert.notEqual(e.exitCode, 0)
    await rejectsWith(ctx.sbx.commands.run(`kill -0 ${h.pid}`, { user: 'root' }), ctx.sdk.CommandExitError)
  })

  it('commands.kill(pid) kills a running process and returns true', T, async () => {
    const h = await ctx.sbx.commands.run('sleep 60', { background: true })
    ctx.track(h.pid)
    assert.equal(await ctx.sbx.commands.kill(h.pid), true)
    await rejectsWith(h.wait(), ctx.sdk.CommandExitError)
    const e = await rejectsWith(
      ctx.sbx.commands.run(`kill -0 ${h.pid}`, { user: 'root' }),
      ctx.sdk.CommandExitError,
    )
    assert.match(e.stderr, /No such process/)
    const listed = await ctx.sbx.commands.list()
    assert.ok(!listed.some((p) => p.pid === h.pid), 'a killed process is no longer listed')
  })

  it('commands.kill of an unknown pid returns false', T, async () => {
    assert.equal(await ctx.sbx.commands.kill(999_999), false)
  })

  it('disconnect() leaves the process running; connect(pid) re-attaches', T, async () => {
    const first = []
    const h = await ctx.sbx.commands.run('sleep 1.5; echo late', {
      background: true,
      onStdout: (d) => first.push(d),
    })
    ctx.track(h.pid)
    await h.disconnect()
    const listed = await ctx.sbx.commands.list()
    assert.ok(listed.some((p) => p.pid === h.pid), 'still running after disconnect')
    const again = []
    const h2 = await ctx.sbx.commands.connect(h.pid, { onStdout: (d) => again.push(d) })
    assert.equal(h2.pid, h.pid)
    const r = await h2.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'late\n')
    assert.equal(again.join(''), 'late\n')
    assert.equal(first.join(''), '', 'a disconnected handle receives nothing')
  })

  // ---------------------------------------------------------------- list / connect
  it('list shows running commands with their config', T, async () => {
    const mark = uid()
    const a = await ctx.sbx.commands.run(`sleep 30 # a${mark}`, {
      background: true,
      cwd: '/tmp',
      envs: { E2E_MARK: mark },
    })
    ctx.track(a.pid)
    const b = await ctx.sbx.commands.run(`sleep 30 # b${mark}`, { background: true })
    ctx.track(b.pid)
    const list = await ctx.sbx.commands.list()
    const pa = list.find((p) => p.pid === a.pid)
    const pb = list.find((p) => p.pid === b.pid)
    assert.ok(pa && pb, `both listed: ${JSON.stringify(list.map((p) => p.pid))}`)
    assert.equal(pa.cmd, '/bin/bash')
    assert.deepEqual(pa.args, ['-l', '-c', `sleep 30 # a${mark}`])
    assert.equal(pa.cwd, '/tmp')
    assert.equal(pa.envs.E2E_MARK, mark)
    assert.deepEqual(pb.args, ['-l', '-c', `sleep 30 # b${mark}`])
    await a.kill()
    await b.kill()
  })

  it('connect attaches to a running pid and receives its later output and exit', T, async () => {
    const h = await ctx.sbx.commands.run('for i in 1 2 3 4; do echo "n$i"; sleep 0.4; done', {
      background: true,
    })
    ctx.track(h.pid)
    await sleep(300)
    const got = []
    const c = await ctx.sbx.commands.connect(h.pid, { onStdout: (d) => got.push(d) })
    const r = await c.wait()
    assert.equal(r.exitCode, 0)
    assert.match(got.join(''), /n4\n$/)
    assert.ok(!got.join('').includes('n1'), 'output produced before connecting is not replayed')
    const orig = await h.wait()
    assert.equal(orig.stdout, 'n1\nn2\nn3\nn4\n')
  })

  it('connect to an unknown pid rejects with NotFoundError', T, async () => {
    await rejectsWith(ctx.sbx.commands.connect(999_999), ctx.sdk.NotFoundError)
  })

  // ---------------------------------------------------------------- stdin
  it('sendStdin delivers strings, bytes, special chars and newlines; closeStdin ends cat with 0', T, async () => {
    const h = await ctx.sbx.commands.run('cat', { background: true, stdin: true })
    ctx.track(h.pid)
    const parts = ['hello\n', 'spé¢iål $HOME `x` \\n "q"\n', 'multi\nline\ninput\n']
    await ctx.sbx.commands.sendStdin(h.pid, parts[0])
    await ctx.sbx.commands.sendStdin(h.pid, parts[1])
    // CommandHandle.sendStdin exists in newer SDKs only.
    await (h.sendStdin ? h.sendStdin(parts[2]) : ctx.sbx.commands.sendStdin(h.pid, parts[2]))
    await ctx.sbx.commands.sendStdin(h.pid, new Uint8Array([0x62, 0x79, 0x74, 0x65, 0x73, 0x0a])) // "bytes\n"
    await waitFor(() => h.stdout.includes('bytes\n'), { what: 'cat to echo the input' })
    await ctx.sbx.commands.closeStdin(h.pid)
    const r = await h.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, parts.join('') + 'bytes\n')
  })

  it('closeStdin ends a reader (handle.closeStdin in newer SDKs); sending after close fails', T, async () => {
    const h = await ctx.sbx.commands.run('wc -c', { background: true, stdin: true })
    ctx.track(h.pid)
    if (h.closeStdin) {
      await h.sendStdin('12345')
      await h.closeStdin()
    } else {
      await ctx.sbx.commands.sendStdin(h.pid, '12345')
      await ctx.sbx.commands.closeStdin(h.pid)
    }
    const r = await h.wait()
    assert.equal(r.stdout.trim(), '5')
    await rejectsWith(ctx.sbx.commands.sendStdin(h.pid, 'late'), ctx.sdk.SandboxError)
  })

  it('sendStdin to a still-running process whose stdin is closed fails', T, async () => {
    const h = await ctx.sbx.commands.run('exec 0<&-; sleep 30', { background: true, stdin: true })
    ctx.track(h.pid)
    await ctx.sbx.commands.closeStdin(h.pid)
    await rejectsWith(ctx.sbx.commands.sendStdin(h.pid, 'x\n'), ctx.sdk.SandboxError)
    await h.kill()
  })

  it('sendStdin to an unknown pid fails with NotFoundError', T, async () => {
    await rejectsWith(ctx.sbx.commands.sendStdin(999_999, 'x'), ctx.sdk.NotFoundError)
  })

  it('closeStdin of an unknown pid fails with NotFoundError', T, async () => {
    await rejectsWith(ctx.sbx.commands.closeStdin(999_999), ctx.sdk.NotFoundError)
  })

  it('without stdin: true, the command sees end of input at once', T, async () => {
    const r = await ctx.sbx.commands.run('cat; echo "rc=$?"', { timeoutMs: 10_000 })
    assert.equal(r.stdout, 'rc=0\n')
  })
})
