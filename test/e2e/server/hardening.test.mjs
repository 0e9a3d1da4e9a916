// What a sandbox's own user can do to it, and what it cannot: file operations as `user` go no
// further than `user` could in a shell (symlinks to root's files included), except that a write
// makes its missing parents for user as E2B's agent does, and a fork bomb (which outlives its
// `timeout`: the agent ends it) or a memory hog inside a sandbox leaves its agent serving and the
// sandbox running.
// A private server with small limits, so the limits are hit quickly.
import { it, before } from 'node:test'
import { useServer } from './harness.mjs'
import { assert, describeEachSdk, rejectsWith, waitFor } from './helpers.mjs'

await useServer({ private: true, args: ['--memory-mb', '256', '--pids-limit', '200'] })

// Under gVisor the limits apply to the runsc sandbox as a whole on the host: its kernel shows no
// cgroup files to read the pids limit from, and an allocation past the memory limit ends the
// whole runsc sandbox, not one process in it (an open problem, written up in docs/security.md).
const gvisor = process.env.WARREN_RUNTIME === 'gvisor' && 'the limits are the runsc sandbox\'s under gVisor (see docs/security.md)'

describeEachSdk('Files act as the requesting user', (ctx) => {
  let sbx
  before(async () => {
    sbx = await ctx.create({ timeoutMs: 120_000 })
  })

  it('a symlink to /etc/shadow cannot be written through as user; /etc/shadow stays as it was', async () => {
    const before = await sbx.commands.run('sha256sum /etc/shadow', { user: 'root' })
    await sbx.commands.run('ln -sfn /etc/shadow ~/link')
    await rejectsWith(sbx.files.write('/home/user/link', 'pwned\n'), ctx.sdk.SandboxError, /403|permission denied/i)
    const after = await sbx.commands.run('sha256sum /etc/shadow', { user: 'root' })
    assert.equal(after.stdout, before.stdout)
  })

  it('user cannot read /etc/shadow, directly or through a symlink; root can', async () => {
    await rejectsWith(sbx.files.read('/etc/shadow'), ctx.sdk.SandboxError, /403|permission denied/i)
    await rejectsWith(sbx.files.read('/home/user/link'), ctx.sdk.SandboxError, /403|permission denied/i)
    assert.match(await sbx.files.read('/etc/shadow', { user: 'root' }), /^root:/)
    assert.match(await sbx.files.read('/home/user/link', { user: 'root' }), /^root:/)
  })

  it("user's filesystem calls stop at root's directories", async () => {
    await rejectsWith(sbx.files.list('/root'), ctx.sdk.SandboxError, /permission/i)
    await rejectsWith(sbx.files.makeDir('/root/made-by-user'), ctx.sdk.SandboxError, /permission/i)
    // /etc/passwd, not /etc/hostname: the engine mounts that one, and gVisor refuses to unlink a
    // mount point before it checks permissions.
    await rejectsWith(sbx.files.remove('/etc/passwd'), ctx.sdk.SandboxError, /permission/i)
    await rejectsWith(sbx.files.rename('/etc/passwd', '/home/user/passwd'), ctx.sdk.SandboxError, /permission/i)
    assert.equal((await sbx.commands.run('test -e /etc/passwd && test ! -e /root/made-by-user')).exitCode, 0)
    assert.ok(await sbx.files.makeDir('/root/made-by-root', { user: 'root' }))
  })

  it("a write makes its missing parents for user, in root's directories too (E2B's SDK writes /0/file as user), never through a symlink", async () => {
    const infos = await sbx.files.write([{ path: '/0/sub/a.txt', data: 'a' }, { path: '/home/user/b.txt', data: 'b' }])
    assert.deepEqual(infos.map((i) => i.path), ['/0/sub/a.txt', '/home/user/b.txt'])
    assert.equal(await sbx.files.read('/0/sub/a.txt'), 'a')
    for (const p of ['/0', '/0/sub', '/0/sub/a.txt']) assert.equal((await sbx.files.getInfo(p)).owner, 'user', p)
    // /root is root's alone (0700): user cannot enter what the agent would make there, so the
    // write is refused and leaves nothing behind. Through a symlink nothing is made for user.
    await rejectsWith(sbx.files.write('/root/new/x.txt', 'x'), ctx.sdk.SandboxError, /403|permission denied/i)
    await sbx.commands.run('ln -sfn / ~/slash')
    await rejectsWith(sbx.files.write('/home/user/slash/via-link/x.txt', 'x'), ctx.sdk.SandboxError, /403|permission denied/i)
    assert.equal((await sbx.commands.run('test ! -e /root/new && test ! -e /via-link', { user: 'root' })).exitCode, 0)
  })

  it("user's own files work as before and belong to user", async () => {
    await sbx.files.write('/home/user/dir/a.txt', 'hello')
    assert.equal(await sbx.files.read('~/dir/a.txt'), 'hello')
    await sbx.files.rename('/home/user/dir/a.txt', '/home/user/dir/b.txt')
    const names = (await sbx.files.list('/home/user/dir')).map((e) => e.name)
    assert.deepEqual(names, ['b.txt'])
    const info = await sbx.files.getInfo('/home/user/dir/b.txt')
    assert.equal(info.owner, 'user')
    await sbx.files.write('/tmp/by-user.txt', 'x')
    assert.equal((await sbx.files.getInfo('/tmp/by-user.txt')).owner, 'user')
    await sbx.files.remove('/home/user/dir')
    assert.equal(await sbx.files.exists('/home/user/dir'), false)
  })
})

describeEachSdk('A sandbox survives what its processes do', (ctx) => {
  let sbx
  before(async () => {
    sbx = await ctx.create({ timeoutMs: 180_000 })
  })

  // The pids cgroup counts every task of the sandbox; reading it needs no fork.
  const cgroup = async () => ((await sbx.files.exists('/sys/fs/cgroup/pids.max')) ? '/sys/fs/cgroup' : '/sys/fs/cgroup/pids') // v2 : v1
  const pids = async () => Number(await sbx.files.read(`${await cgroup()}/pids.current`))
  // Why the agent stopped answering, for a failure's message: waits for it to be back (its init
  // starts it again) and reads the memory cgroup's OOM kills and peak.
  const agentEnd = async () => {
    const m = await waitFor(() => sbx.commands.run(
      'M=/sys/fs/cgroup/memory; cat /sys/fs/cgroup/memory.events $M/memory.oom_control $M/memory.max_usage_in_bytes $M/memory.failcnt 2>/dev/null; true',
      { user: 'root' }).then((r) => r.stdout), { timeoutMs: 40_000, intervalMs: 500, what: 'the agent to answer again' }).catch((e) => e.message)
    return `the agent answered again; the sandbox's memory cgroup: ${JSON.stringify(m)}`
  }
  // pids.events counts the forks the limit refused.
  const refusals = async () => Number(/^max (\d+)/m.exec(await sbx.files.read(`${await cgroup()}/pids.events`).catch(() => ''))?.[1] ?? 0)

  it("the agent and its init rank under their users' processes for the OOM killer", { skip: gvisor }, async () => {
    // On Docker the container's score; on Kubernetes the node agent lowers the kubelet's (up to
    // 999, with which the agent, bigger than most of its users' processes, was taken first).
    const scores = await sbx.commands.run(`for p in $(awk '$2 == "(warren-agent)" {print $1}' /proc/[0-9]*/stat); do cat /proc/$p/oom_score_adj; done`, { user: 'root' })
    const agents = scores.stdout.trim().split('\n').map(Number)
    assert.ok(agents.length >= 2 && agents.every((s) => s <= 0), `the init's and agent's scores: ${scores.stdout}`)
    assert.equal((await sbx.commands.run('cat /proc/self/oom_score_adj')).stdout, '1000\n')
  })

  it('a command started while every pid is taken fails at once, naming the limit', { skip: gvisor }, async () => {
    assert.equal(Number(await sbx.files.read(`${await cgroup()}/pids.max`)), 200)
    // Quiet holders: perl forks sleepers until a fork is refused, says so, then sleeps too. (It
    // says so itself: under Kubernetes the limit met may be the pod's, whose count the sandbox's
    // own cgroup files do not show.)
    let full = false
    const holders = await sbx.commands.run("perl -e '$| = 1; while (defined(my $p = fork)) { if (!$p) { sleep 600; exit } } print qq(full\\n); sleep 600'",
      { background: true, timeoutMs: 0, onStdout: (d) => { full ||= d.includes('full') } })
    try {
      await waitFor(() => full, { timeoutMs: 20_000, what: 'the holders to take every pid' })
      const t0 = Date.now()
      const refused = await sbx.commands.run('echo ok').catch((e) => e)
      assert.ok(refused instanceof Error, 'a command started with every pid taken')
      assert.match(refused.message, /process limit of 200 processes and threads \(warren serve --pids-limit\)/)
      assert.ok(Date.now() - t0 < 5_000, `refused after ${Date.now() - t0} ms`)
    } finally {
      await holders.kill()
    }
    await waitFor(async () => (await pids()) < 100, { timeoutMs: 20_000, what: 'the holders to end' })
  })

  it('a fork bomb under timeout outlives it, and the agent ends it: a command answers within seconds', { skip: gvisor }, async (t) => {
    const before = await refusals()
    // The bomb's first shell exits at once, so timeout has nothing left to kill. Its members fork
    // in a loop and never exit: without the agent's guard they hold every pid for good. (bash's
    // own `:(){ :|:& };:` burns out by itself within seconds under a limit of 200; under the
    // default limits it held ~2,800 processes for minutes.)
    await sbx.commands.run(`timeout 20 bash -c "perl -e 'fork while 1' &"`, { background: true, timeoutMs: 0 })
    await waitFor(async () => (await refusals()) > before, { timeoutMs: 20_000, what: 'the bomb to reach the pids limit' })
    const hit = Date.now()
    // Every attempt answers at once: refused naming the limit while the bomb holds the pids, then
    // run once the agent has ended it (after 2 s of refused forks).
    const deadline = hit + 15_000
    for (;;) {
      const t0 = Date.now()
      const r = await sbx.commands.run('echo alive', { requestTimeoutMs: 10_000 }).catch((e) => e)
      assert.ok(Date.now() - t0 < 8_000, `an attempt took ${Date.now() - t0} ms`)
      if (!(r instanceof Error)) {
        assert.equal(r.stdout, 'alive\n')
        break
      }
      if (!/process limit of 200 processes and threads/.test(r.message)) {
        assert.fail(`'echo alive' during the bomb: ${r.message}; ${await agentEnd()}`)
      }
      assert.ok(Date.now() < deadline, `'echo alive' still refused ${Date.now() - hit} ms after the bomb reached the limit`)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    t.diagnostic(`'echo alive' ran ${Date.now() - hit} ms after the bomb reached the limit`)
    await waitFor(async () => (await pids()) < 100, { timeoutMs: 10_000, what: 'the bomb\'s pids to be freed' })
    assert.equal((await sbx.getInfo()).state, 'running')
  })

  it('a memory hog past the memory limit is killed; the agent and the sandbox survive', { skip: gvisor }, async () => {
    // tail keeps the whole unending line in memory: it grows until the OOM killer stops it.
    const r = await sbx.commands.run('tail /dev/zero', { timeoutMs: 60_000 }).catch((e) => e)
    assert.ok(r instanceof ctx.sdk.CommandExitError, `got ${r?.constructor?.name}: ${r?.message}`)
    assert.match(r.error ?? '', /signal: killed/) // envd's wire reports a signal death as exit code -1
    assert.equal((await sbx.commands.run('echo ok')).stdout, 'ok\n')
    assert.equal((await sbx.getInfo()).state, 'running')
  })

  it('an agent killed while a fork bomb holds every pid comes back: its init ends the bomb to start it', { skip: gvisor }, async (t) => {
    const agentPid = async () => (await sbx.commands.run(`awk '$4 == 1 && $2 == "(warren-agent)" {print $1}' /proc/[0-9]*/stat`, { user: 'root' })).stdout.trim()
    const first = await agentPid()
    assert.match(first, /^\d+$/)
    const cg = await cgroup()
    // Root kills the agent at the bomb's first refused fork (pids.events counts them), long
    // before the agent's guard (after 2 s of refused forks) would end the bomb. The bomb starts
    // once root's shell waits: its login shell forks (/etc/profile's $(id -u)), and a fork
    // refused while the bomb holds the pids is retried for seconds, after the guard. The wait
    // forks nothing (builtins only, no command substitution), as nothing could then. The bomb
    // runs at nice 19, so that ~200 forking processes do not starve the waiting shell past the
    // guard's 2 s on a busy machine.
    await sbx.commands.run(`refused() { r=0; while read -r k v; do if [ "$k" = max ]; then r=$v; fi; done < ${cg}/pids.events; }
refused; b=$r; echo "waiting: $b refused" > /tmp/killer
while refused; [ "$r" -le "$b" ]; do :; done
echo "killing at $r refused" > /tmp/killer
kill -9 ${first}`, { user: 'root', background: true, timeoutMs: 0 })
    await waitFor(async () => (await sbx.files.read('/tmp/killer').catch(() => '')).startsWith('waiting'), { timeoutMs: 20_000, what: "root's shell to wait for the bomb" })
    const t0 = Date.now()
    // The kill may come before the agent has answered the bomb's start, which then fails so.
    await sbx.commands.run(`timeout 20 bash -c "nice -n 19 perl -e 'fork while 1' &"`, { background: true, timeoutMs: 0 })
      .catch((e) => assert.match(e.message, /not running anymore/, `the bomb's start: ${e.message}`))
    const again = await waitFor(async () => {
      const pid = await agentPid().catch(() => '')
      return pid !== '' && pid !== first && pid
    }, { timeoutMs: 40_000, intervalMs: 250, what: 'the agent to be started again' })
      .catch(async (e) => assert.fail(`${e.message}; the sandbox ${(await sbx.getInfo().catch((e) => e)).state}; ${await agentEnd()}; the agent now: ${await agentPid().catch((e) => e.message)} (was ${first}); the killer: ${(await sbx.files.read('/tmp/killer').catch((e) => e.message)).trim()}; forks refused: ${await refusals()}`))
    t.diagnostic(`the agent ${first} was started again as ${again} ${Date.now() - t0} ms after the bomb`)
    assert.equal((await sbx.commands.run('echo alive')).stdout, 'alive\n')
    await waitFor(async () => (await pids()) < 100, { timeoutMs: 10_000, what: 'the bomb\'s pids to be freed' })
    assert.equal((await sbx.getInfo()).state, 'running')
  })
})

describeEachSdk('An agent that ends is started again', (ctx) => {
  it('killed by root inside, the agent comes back with the same access token and env vars, and what it started runs on', async () => {
    const sbx = await ctx.create({ timeoutMs: 120_000, envs: { GREETING: 'kept' } })
    try {
      // The agent proper is PID 1's child of the same name.
      const agentPid = async () => (await sbx.commands.run(`awk '$4 == 1 && $2 == "(warren-agent)" {print $1}' /proc/[0-9]*/stat`, { user: 'root' })).stdout.trim()
      const first = await agentPid()
      assert.match(first, /^\d+$/)
      const sleeper = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 })
      // The kill waits until the command that starts it has answered.
      await sbx.commands.run(`nohup sh -c 'sleep 0.3; kill -9 ${first}' >/dev/null 2>&1 &`, { user: 'root' })
      const second = await waitFor(async () => { const p = await agentPid(); return p !== first && p }, { timeoutMs: 15_000, what: 'a new agent to answer' })
      assert.match(second, /^\d+$/)
      assert.equal((await sbx.commands.run('echo $GREETING')).stdout, 'kept\n')
      assert.equal((await sbx.commands.run(`kill -0 ${sleeper.pid} && echo running`)).stdout, 'running\n')
      assert.equal((await sbx.getInfo()).state, 'running')
    } finally {
      await sbx.kill()
    }
  })
})
