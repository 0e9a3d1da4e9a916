// The code interpreter through `warren serve` with the npm @e2b/code-interpreter SDK: template
// code-interpreter-v1 (image warren/code-interpreter, built by `warren image build
// code-interpreter`), runCode in python, javascript, typescript, bash, R and Java, the callbacks,
// state, contexts, errors, images, DataFrames, env vars, timeouts, a sandbox killed mid-run,
// a secure sandbox without public traffic, and code that misbehaves (megabytes of output,
// endless loops, forks, a kernel that kills itself).
import { describe, it, before, after } from 'node:test'
import { execFileSync } from 'node:child_process'
import { Sandbox, TimeoutError, NotFoundError } from '@e2b/code-interpreter'
import { useServer } from './harness.mjs'
import { assert, proxyFetch, sleep, uid, waitFor } from './helpers.mjs'

const IMAGE = 'warren/code-interpreter'
const imageMissing = (() => {
  try {
    execFileSync('docker', ['image', 'inspect', IMAGE], { stdio: 'ignore' })
    return false
  } catch {
    return `${IMAGE} is missing: run bin/warren image build code-interpreter`
  }
})()

await useServer()

const tag = `e2e-ci-${uid()}`
const made = new Set()
async function create(opts = {}) {
  const sbx = await Sandbox.create({ timeoutMs: 300_000, ...opts, metadata: { e2e: tag, ...opts.metadata } })
  made.add(sbx.sandboxId)
  return sbx
}
after(async () => {
  await Promise.all([...made].map((id) => Sandbox.kill(id).catch(() => {})))
})

/** Asserts an execution ended cleanly with result text `text`. */
function assertText(ex, text, what = 'result') {
  assert.equal(ex.error, undefined, `${what}: unexpected error ${ex.error?.name}: ${ex.error?.value}`)
  assert.equal(ex.text, text, `${what}: results ${JSON.stringify(ex.results)}`)
}

/**
 * Asserts an R execution ended cleanly with one result of text `text`, R's printed form
 * ('[1] 42'). IRkernel sends values as display data, so, as with E2B's server, they are not
 * main results and `execution.text` is undefined: clients read `results[0].text`.
 */
function assertR(ex, text, what = 'R result') {
  assert.equal(ex.error, undefined, `${what}: unexpected error ${ex.error?.name}: ${ex.error?.value}`)
  assert.deepEqual(ex.results.map((r) => r.text), [text], `${what}: results ${JSON.stringify(ex.results)}`)
  assert.equal(ex.results[0].isMainResult, false, `${what}: a main result`)
  assert.equal(ex.text, undefined, `${what}: execution.text`)
}

/** Rejects with TimeoutError, the SDK's error for aborted and cut executions. */
async function rejectsTimeout(promise) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof TimeoutError, `want TimeoutError, got ${e?.constructor?.name}: ${e?.message}`)
    return true
  })
}

describe('code interpreter (@e2b/code-interpreter)', { skip: imageMissing, timeout: 600_000 }, () => {
  let sbx
  before(async () => {
    sbx = await create({ envs: { WARREN_SBX_VAR: 'sandbox-wide' } })
  })

  it('Sandbox.create() starts template code-interpreter-v1', async () => {
    const info = await sbx.getInfo()
    assert.equal(info.templateId, 'code-interpreter-v1')
    assert.equal(info.state, 'running')
  })

  it('a sandbox comes from the warm pool once it holds one, and runs code', async () => {
    // The server keeps started code-interpreter containers (--warm-pool-code-interpreter);
    // wait for it to be refilled (GET /metrics), so that the claim does not depend on timing.
    const api = (path) => fetch(`${process.env.E2B_API_URL}${path}`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })
    const gauge = (text, name) => Number(text.match(new RegExp(`^${name}\\{template="code-interpreter-v1"\\} (\\d+)$`, 'm'))?.[1])
    const metrics = await waitFor(async () => {
      const text = await (await api('/metrics')).text()
      return gauge(text, 'warren_warm_pool_ready') >= 1 && text
    }, { timeoutMs: 60_000, what: 'a code-interpreter container in the warm pool' })
    // auto by default: at least 1, more after bursts of creates
    assert.ok(gauge(metrics, 'warren_warm_pool_size') >= 1, 'the default pool size')
    const pooled = await create()
    const { logs } = await (await api(`/v2/sandboxes/${pooled.sandboxId}/logs`)).json()
    const created = logs.find((l) => l.message === 'sandbox created')
    assert.equal(created?.fields?.pool, 'true', `"sandbox created" event: ${JSON.stringify(created)}`)
    assert.equal(created.fields.template, 'code-interpreter-v1')
    assertText(await pooled.runCode('1+1'), '2')
    const js = await pooled.runCode('[1, 2].map((x) => x * 2).join()', { language: 'javascript' })
    assertText(js, '2,4', 'javascript')
    await pooled.kill()
  })

  it('python: the last expression is the result, print goes to stdout, state persists', async () => {
    assertText(await sbx.runCode('x = 40\nx + 2'), '42')
    assertText(await sbx.runCode('x += 1\nx'), '41')
    const ex = await sbx.runCode('print("hello"); print("two")')
    assert.deepEqual(ex.logs.stdout.join(''), 'hello\ntwo\n')
    assert.deepEqual(ex.results, [])
    assert.equal(typeof ex.executionCount, 'number')
  })

  it('javascript, typescript and bash run in their own stateful contexts', async () => {
    assertText(await sbx.runCode('const a = 20; a * 2 + 2', { language: 'javascript' }), '42', 'js')
    assertText(await sbx.runCode('a + 1', { language: 'js' }), '21', 'js state')
    const js = await sbx.runCode('console.log("from js"); console.error("js err")', { language: 'javascript' })
    assert.equal(js.logs.stdout.join(''), 'from js\n')
    assert.equal(js.logs.stderr.join(''), 'js err\n')
    assertText(await sbx.runCode('const n: number = 41;\nn + 1', { language: 'typescript' }), '42', 'ts')
    const bash = await sbx.runCode('B=7; echo hi; pwd', { language: 'bash' })
    assert.equal(bash.logs.stdout.join(''), 'hi\n/home/user\n')
    const bash2 = await sbx.runCode('echo $B; cd /tmp', { language: 'bash' })
    assert.equal(bash2.logs.stdout.join(''), '7\n')
    const bash3 = await sbx.runCode('pwd; whoami', { language: 'bash' })
    // Kernels run as root, as in E2B's template (its Jupyter server runs as root), in /home/user.
    assert.equal(bash3.logs.stdout.join(''), '/tmp\nroot\n', 'bash keeps its cwd and runs as root')
  })

  it('r: values come back as results, print and cat go to stdout, state persists, cwd is /home/user', async () => {
    const r = { language: 'r' }
    const ex = await sbx.runCode('x <- 40\nprint("from r")\nx + 2', r)
    assertR(ex, '[1] 42')
    assert.equal(ex.logs.stdout.join(''), '[1] "from r"\n')
    assert.equal(typeof ex.executionCount, 'number')
    assertR(await sbx.runCode('x + 1', r), '[1] 41', 'R state')
    assertR(await sbx.runCode('getwd()', r), '[1] "/home/user"', 'R cwd')
    const streams = await sbx.runCode('cat("a", "b\\n"); message("to stderr"); invisible(x)', r)
    assert.equal(streams.logs.stdout.join(''), 'a b\n')
    assert.match(streams.logs.stderr.join(''), /^to stderr\n/)
    assert.deepEqual(streams.results, [], 'an invisible value is no result')
    const df = await sbx.runCode('data.frame(a = 1:2, b = c("x", "y"))', r)
    assert.match(df.results[0]?.html ?? '', /<table/, 'a data.frame has html')
    const plot = await sbx.runCode('plot(1:10)', r)
    assert.ok(plot.results.some((res) => res.png), `no png in ${JSON.stringify(plot.results.map((res) => res.formats()))}`)
  })

  it('java: JShell keeps state, streams output, reports exceptions, and reads env vars as properties', async () => {
    // A sandbox of its own: a JVM takes 100–150 MB, which the other tests' kernels need (under
    // gVisor, going past the memory limit ends the whole sandbox).
    const jsb = await create({ envs: { WARREN_SBX_VAR: 'sandbox-wide' } })
    try {
      const java = { language: 'java' }
      const start = Date.now()
      assertText(await jsb.runCode('int x = 1 + 1; x', java), '2', 'java')
      const first = Date.now() - start
      assertText(await jsb.runCode('int twice(int n) { return 2 * n; }\nrecord P(int v) {}\ntwice(new P(x).v()) * 10 + x', java), '42', 'java state: variables, methods, classes')
      assertText(await jsb.runCode('import java.time.Duration;\nList.of(Duration.ofMinutes(1).toSeconds())', java), '[60]', 'imports')
      assertText(await jsb.runCode('String s = "text"; s', java), 'text', 'a string is its text')
      assertText(await jsb.runCode('System.getProperty("user.dir")', java), '/home/user', 'java cwd')
      const decl = await jsb.runCode('x = 5;', java)
      assert.equal(decl.error, undefined)
      assert.deepEqual(decl.results, [], 'a statement ended by a semicolon has no result')

      // println arrives as the text, then its newline, as from E2B's Java kernel (its Python
      // tests expect logs.stdout[0] to be "Hello, World!"); each as it is printed.
      const hello = await jsb.runCode('System.out.println("Hello, World!")', java)
      assert.equal(hello.logs.stdout[0], 'Hello, World!')
      assert.equal(hello.logs.stdout.join(''), 'Hello, World!\n')
      const seen = []
      const t0 = Date.now()
      const streamed = await jsb.runCode(
        'for (int i = 0; i < 3; i++) { System.out.println("line " + i); Thread.sleep(700); }\nSystem.err.print("done")',
        { ...java, onStdout: (m) => seen.push([m.line, Date.now() - t0]), onStderr: (m) => seen.push([m.line, Date.now() - t0]) },
      )
      const took = Date.now() - t0
      assert.equal(streamed.logs.stdout.join(''), 'line 0\nline 1\nline 2\n')
      assert.deepEqual(streamed.logs.stderr, ['done'])
      assert.equal(seen[0][0], 'line 0')
      assert.ok(seen[0][1] < took - 1000, `the first line came at ${seen[0][1]} ms of ${took}: not streamed`)

      const errors = []
      const ex = await jsb.runCode('int div(int a) { return 10 / a; }\ndiv(0)', { ...java, onError: (e) => errors.push(e) })
      assert.equal(ex.error?.name, 'java.lang.ArithmeticException')
      assert.equal(ex.error?.value, '/ by zero')
      assert.match(ex.error?.traceback ?? '', /^java\.lang\.ArithmeticException: \/ by zero\n\tat div\(#\d+:1\)/)
      assert.deepEqual(errors.map((e) => e.name), ['java.lang.ArithmeticException'])
      const bad = await jsb.runCode('int y = 1;\nundefinedName + 1;\ny = 2;', java)
      assert.equal(bad.error?.name, 'CompilationException')
      assert.match(bad.error?.value ?? '', /^cannot find symbol/)
      assertText(await jsb.runCode('y', java), '1', 'snippets before the failing one ran, none after')

      // Env vars are System properties, as in E2B's Java kernel (and System.getenv sees them).
      assertText(await jsb.runCode('System.getProperty("WARREN_SBX_VAR")', java), 'sandbox-wide', 'java sandbox-wide')
      assertText(await jsb.runCode('System.getProperty("RUN_VAR") + System.getenv("WARREN_SBX_VAR")', {
        ...java, envs: { RUN_VAR: 'j-', WARREN_SBX_VAR: 'overridden' },
      }), 'j-overridden', 'java per execution')
      assertText(await jsb.runCode('System.getProperty("RUN_VAR", "unset") + " " + System.getProperty("WARREN_SBX_VAR")', java),
        'unset sandbox-wide', 'java after the execution')

      // A client timeout stops the running code (Thread.stop in JShell); the kernel and its
      // state stay.
      await rejectsTimeout(jsb.runCode('while (true) { x++; }', { ...java, timeoutMs: 2000 }))
      await rejectsTimeout(jsb.runCode('Thread.sleep(60_000);', { ...java, timeoutMs: 2000 }))
      const t = Date.now()
      assertText(await jsb.runCode('twice(21)', java), '42', 'java after a timeout')
      assert.ok(Date.now() - t < 10_000, `the next execution took ${Date.now() - t} ms`)

      // A context of its own: another JShell, its own cwd and state.
      const ctx = await jsb.createCodeContext({ language: 'java', cwd: '/tmp' })
      assert.deepEqual({ language: ctx.language, cwd: ctx.cwd }, { language: 'java', cwd: '/tmp' })
      assertText(await jsb.runCode('System.getProperty("user.dir")', { context: ctx }), '/tmp', 'java context cwd')
      const isolated = await jsb.runCode('x', { context: ctx })
      assert.equal(isolated.error?.name, 'CompilationException', 'a new context does not see the default one\'s x')
      assertText(await jsb.runCode('int c = 3; c', { context: ctx }), '3')
      await jsb.restartCodeContext(ctx)
      assert.equal((await jsb.runCode('c', { context: ctx })).error?.name, 'CompilationException', 'restart forgets state')
      await jsb.removeCodeContext(ctx)
      await assert.rejects(jsb.runCode('1', { context: ctx }), NotFoundError)
      console.log(`first java execution (a JVM starts) ${first} ms`)
    } finally {
      await jsb.kill()
    }
  })

  it('callbacks get stdout, stderr, results and errors as they come', async () => {
    const got = { out: [], err: [], results: [], errors: [] }
    const opts = {
      onStdout: (m) => got.out.push(m),
      onStderr: (m) => got.err.push(m),
      onResult: (r) => got.results.push(r),
      onError: (e) => got.errors.push(e),
    }
    const ex = await sbx.runCode('import sys\nprint("out")\nprint("err", file=sys.stderr)\n6 * 7', opts)
    assert.deepEqual(got.out.map((m) => m.line), ['out\n'])
    assert.deepEqual(got.err.map((m) => m.line), ['err\n'])
    assert.equal(got.out[0].error, false)
    assert.equal(got.err[0].error, true)
    assert.ok(got.out[0].timestamp > 0, 'stdout has a timestamp')
    assert.deepEqual(got.results.map((r) => r.text), ['42'])
    assert.equal(got.results[0].isMainResult, true)
    assert.equal(ex.text, '42')
    await sbx.runCode('1 / 0', opts)
    assert.deepEqual(got.errors.map((e) => e.name), ['ZeroDivisionError'])
  })

  it('errors carry name, value and traceback', async () => {
    const ex = await sbx.runCode('def f():\n    raise ValueError("bad input")\nf()')
    assert.equal(ex.error?.name, 'ValueError')
    assert.equal(ex.error?.value, 'bad input')
    // IPython colours tracebacks, as in E2B's sandboxes.
    const tb = (ex.error?.traceback ?? '').replace(/\x1b\[[0-9;]*m/g, '')
    assert.match(tb, /----> 3 f\(\)/)
    assert.match(tb, /ValueError: bad input/)
    assert.deepEqual(ex.results, [])
    const js = await sbx.runCode('throw new TypeError("nope")', { language: 'javascript' })
    assert.equal(js.error?.name, 'TypeError')
    assert.equal(js.error?.value, 'nope')
    const bash = await sbx.runCode('echo before; false', { language: 'bash' })
    assert.equal(bash.logs.stdout.join(''), 'before\n')
    assert.ok(bash.error, 'a failing bash command is an error')
    const r = await sbx.runCode('f <- function() stop("bad input")\nprint("before")\nf()', { language: 'r' })
    assert.equal(r.logs.stdout.join(''), '[1] "before"\n')
    assert.equal(r.error?.name, 'ERROR', 'IRkernel names every R error ERROR')
    assert.match(r.error?.value ?? '', /^Error in f\(\): bad input/)
    assert.match(r.error?.traceback ?? '', /stop\("bad input"\)/)
    assert.deepEqual(r.results, [])
  })

  it('matplotlib figures come back as png (and a line chart)', async () => {
    const ex = await sbx.runCode(
      'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title("squares")\nplt.show()',
    )
    assert.equal(ex.error, undefined, ex.error?.traceback)
    const png = ex.results.find((r) => r.png)
    assert.ok(png, `no png in ${JSON.stringify(ex.results.map((r) => r.formats()))}`)
    assert.deepEqual([...Buffer.from(png.png, 'base64').subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
    assert.equal(png.isMainResult, false)
    assert.equal(png.chart?.type, 'line')
    assert.equal(png.chart?.title, 'squares')
  })

  it('pandas DataFrames come back as html and data', async () => {
    const ex = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
    assert.equal(ex.error, undefined, ex.error?.traceback)
    const r = ex.results[0]
    assert.match(r.html ?? '', /<table/)
    assert.deepEqual(r.data, { a: [1, 2], b: ['x', 'y'] })
    assert.ok(r.text.includes('a') && r.text.includes('x'), r.text)
  })

  it('env vars: sandbox-wide from create, per execution set then reverted', async () => {
    assertText(await sbx.runCode('import os\nos.environ.get("WARREN_SBX_VAR")'), 'sandbox-wide')
    assertText(await sbx.runCode('os.environ["RUN_VAR"] + os.environ["WARREN_SBX_VAR"]', {
      envs: { RUN_VAR: 'one-', WARREN_SBX_VAR: 'overridden' },
    }), 'one-overridden')
    assertText(await sbx.runCode('str(os.environ.get("RUN_VAR")) + " " + os.environ["WARREN_SBX_VAR"]'), 'None sandbox-wide')
    assertText(await sbx.runCode('process.env.RUN_VAR', { language: 'javascript', envs: { RUN_VAR: 'js-run' } }), 'js-run')
    assertText(await sbx.runCode('String(process.env.RUN_VAR) + " " + process.env.WARREN_SBX_VAR', { language: 'javascript' }), 'undefined sandbox-wide')
    const bash = await sbx.runCode('echo "$RUN_VAR $WARREN_SBX_VAR"', { language: 'bash', envs: { RUN_VAR: 'b' } })
    assert.equal(bash.logs.stdout.join(''), 'b sandbox-wide\n')
    const after = await sbx.runCode('echo "[$RUN_VAR]"', { language: 'bash' })
    assert.equal(after.logs.stdout.join(''), '[]\n')
    const r = { language: 'r' }
    assertR(await sbx.runCode('Sys.getenv("WARREN_SBX_VAR")', r), '[1] "sandbox-wide"', 'R sandbox-wide')
    assertR(await sbx.runCode('paste0(Sys.getenv("RUN_VAR"), Sys.getenv("WARREN_SBX_VAR"))', {
      ...r, envs: { RUN_VAR: 'r-', WARREN_SBX_VAR: 'overridden' },
    }), '[1] "r-overridden"', 'R per execution')
    assertR(await sbx.runCode('paste(Sys.getenv("RUN_VAR", unset = "unset"), Sys.getenv("WARREN_SBX_VAR"))', r),
      '[1] "unset sandbox-wide"', 'R after the execution')
  })

  it('contexts: create, list, isolated state, restart, remove', async () => {
    const py = await sbx.createCodeContext({ cwd: '/tmp' })
    const sh = await sbx.createCodeContext({ language: 'bash' })
    assert.equal(py.language, 'python')
    assert.equal(py.cwd, '/tmp')
    assert.equal(sh.language, 'bash')
    assert.equal(sh.cwd, '/home/user')
    assertText(await sbx.runCode('import os\nctx_var = 5\nos.getcwd()', { context: py }), '/tmp')
    const other = await sbx.runCode('ctx_var')
    assert.equal(other.error?.name, 'NameError', 'the default context does not see another context\'s variables')

    const list = await sbx.listCodeContexts()
    const ids = list.map((c) => c.id)
    assert.ok(ids.includes(py.id) && ids.includes(sh.id), `list ${JSON.stringify(list)}`)
    assert.deepEqual(list.find((c) => c.id === py.id), { id: py.id, language: 'python', cwd: '/tmp' })

    await sbx.restartCodeContext(py)
    const gone = await sbx.runCode('ctx_var', { context: py })
    assert.equal(gone.error?.name, 'NameError', 'restart forgets state')
    assertText(await sbx.runCode('import os\nos.getcwd()', { context: py }), '/tmp', 'restart keeps the cwd')

    await sbx.removeCodeContext(py.id)
    await sbx.removeCodeContext(sh)
    const left = (await sbx.listCodeContexts()).map((c) => c.id)
    assert.ok(!left.includes(py.id) && !left.includes(sh.id), `still listed: ${left}`)
    await assert.rejects(sbx.runCode('1', { context: py }), NotFoundError)
    await assert.rejects(sbx.restartCodeContext(py.id), NotFoundError)
  })

  it('contexts in R: own cwd and state, restart, remove', async () => {
    const ctx = await sbx.createCodeContext({ language: 'r', cwd: '/tmp' })
    assert.equal(ctx.language, 'r')
    assert.equal(ctx.cwd, '/tmp')
    assertR(await sbx.runCode('ctx_var <- 5\ngetwd()', { context: ctx }), '[1] "/tmp"', 'R context cwd')
    assertR(await sbx.runCode('ctx_var * 2', { context: ctx }), '[1] 10', 'R context state')
    assertR(await sbx.runCode('exists("ctx_var")', { language: 'r' }), '[1] FALSE', 'the default R context')
    assertR(await sbx.runCode('Sys.getenv("CTX_VAR")', { context: ctx, envs: { CTX_VAR: 'in-context' } }), '[1] "in-context"')
    assert.deepEqual((await sbx.listCodeContexts()).find((c) => c.id === ctx.id), { id: ctx.id, language: 'r', cwd: '/tmp' })
    await sbx.restartCodeContext(ctx)
    assertR(await sbx.runCode('exists("ctx_var")', { context: ctx }), '[1] FALSE', 'restart forgets state')
    await sbx.removeCodeContext(ctx)
    await assert.rejects(sbx.runCode('1', { context: ctx }), NotFoundError)
  })

  it('a client timeout interrupts the execution; the context keeps its state and works', async () => {
    await sbx.runCode('kept = "still here"')
    const start = Date.now()
    await rejectsTimeout(sbx.runCode('import time\ntime.sleep(60)', { timeoutMs: 1500 }))
    assert.ok(Date.now() - start < 10_000, 'the timeout fired late')
    const t = Date.now()
    assertText(await sbx.runCode('kept'), 'still here')
    assert.ok(Date.now() - t < 10_000, `the next execution took ${Date.now() - t} ms`)
  })

  it('code that never ends: timeout, then the next execution works; other contexts are unaffected', async () => {
    await rejectsTimeout(sbx.runCode('while True:\n    pass', { timeoutMs: 2000 }))
    assertText(await sbx.runCode('1 + 1'), '2')
    await rejectsTimeout(sbx.runCode('while (true) {}', { language: 'javascript', timeoutMs: 2000 }))
    assertText(await sbx.runCode('1 + 1', { language: 'javascript' }), '2', 'js after an endless loop')
    await rejectsTimeout(sbx.runCode('while true; do :; done', { language: 'bash', timeoutMs: 2000 }))
    const bash = await sbx.runCode('echo ok', { language: 'bash' })
    assert.equal(bash.logs.stdout.join(''), 'ok\n')
    await sbx.runCode('r_kept <- "still here"', { language: 'r' })
    await rejectsTimeout(sbx.runCode('while (TRUE) {}', { language: 'r', timeoutMs: 2000 }))
    assertR(await sbx.runCode('r_kept', { language: 'r' }), '[1] "still here"', 'R after an endless loop')
  })

  it('megabytes of output arrive whole, and the stream ends well-formed', async () => {
    const lines = 4000
    const width = 1000
    let seen = 0
    const ex = await sbx.runCode(`for i in range(${lines}):\n    print("x" * ${width - 1})\n"done"`, {
      onStdout: (m) => (seen += m.line.length),
      timeoutMs: 120_000,
    })
    assert.equal(ex.error, undefined)
    assert.equal(ex.logs.stdout.join('').length, lines * width)
    assert.equal(seen, lines * width)
    assert.equal(ex.text, 'done')
    assertText(await sbx.runCode('2 + 2'), '4')
  })

  it('code that forks: children do not break the stream', async () => {
    const ex = await sbx.runCode(
      'import os, subprocess\npid = os.fork()\nif pid == 0:\n    os._exit(7)\n' +
        'subprocess.Popen(["sleep", "300"])\nos.waitpid(pid, 0)[1] >> 8',
    )
    assertText(ex, '7')
    const bash = await sbx.runCode('for i in 1 2 3; do sleep 300 & done; echo started', { language: 'bash', timeoutMs: 20_000 })
    assert.equal(bash.error, undefined)
    assert.equal(bash.logs.stdout.join(''), 'started\n')
    assertText(await sbx.runCode('3 + 3'), '6')
  })

  it('a kernel that kills itself: an error, a fresh kernel for the next execution, other contexts unaffected', async () => {
    assertText(await sbx.runCode('survivor = 1; survivor', { language: 'javascript' }), '1')
    const other = await sbx.createCodeContext()
    await sbx.runCode('mine = 9', { context: other })
    const ex = await sbx.runCode('import os\nos.kill(os.getpid(), 9)', { timeoutMs: 60_000 })
    assert.ok(ex.error, 'a dead kernel is reported as an error')
    assertText(await sbx.runCode('1 + 1'), '2', 'after the kernel died')
    assertText(await sbx.runCode('mine', { context: other }), '9', 'another python context')
    assertText(await sbx.runCode('survivor', { language: 'javascript' }), '1', 'the javascript context')
    await sbx.removeCodeContext(other)
  })
})

describe('code interpreter: secure sandbox without public traffic', { skip: imageMissing, timeout: 300_000 }, () => {
  it('runCode works; the code interpreter refuses requests without the traffic token', async () => {
    const sbx = await create({ secure: true, network: { allowPublicTraffic: false } })
    assert.ok(sbx.trafficAccessToken, 'the sandbox has a traffic token')
    assertText(await sbx.runCode('21 * 2'), '42')
    const ctx = await sbx.createCodeContext({ language: 'bash' })
    assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
    const bare = await proxyFetch(sbx.sandboxId, 49999, '/contexts')
    assert.equal(bare.status, 403, 'no traffic token')
    const ok = await proxyFetch(sbx.sandboxId, 49999, '/contexts', { headers: { 'E2B-Traffic-Access-Token': sbx.trafficAccessToken } })
    assert.equal(ok.status, 200, 'with the traffic token')
  })
})

describe('code interpreter: sandbox killed during an execution', { skip: imageMissing, timeout: 300_000 }, () => {
  it('surfaces as the SDK\'s TimeoutError', async () => {
    const sbx = await create()
    assertText(await sbx.runCode('1'), '1')
    let started
    const running = new Promise((ok) => (started = ok))
    const outcome = sbx
      .runCode('import time\nprint("started", flush=True)\ntime.sleep(120)', { timeoutMs: 100_000, onStdout: () => started() })
      .then(() => assert.fail('the execution finished in a killed sandbox'), (e) => e)
    await Promise.race([running, sleep(30_000)])
    await Sandbox.kill(sbx.sandboxId)
    const err = await outcome
    assert.ok(err instanceof TimeoutError, `want TimeoutError, got ${err?.constructor?.name}: ${err?.message}`)
  })
})
