// codeinterp-bench.mjs: benchmark the code interpreter through `warren serve` with the npm
// @e2b/code-interpreter SDK, the way users reach it (E2B_API_URL/E2B_SANDBOX_URL).
//
//   node bench/codeinterp/codeinterp-bench.mjs [--runs 200] [--creates 10] [--settle-ms 3000]
//                                              [--json] [--serve-arg=... ...]
//
// It starts its own server (test/e2e/server/harness.mjs: free 127.0.0.1 port, fresh state dir,
// its own container label) and removes every sandbox and container it made at the end. Prints:
//   runCode   sbx.runCode('1+1') round trip on a warm python context (--runs, after 20 warm-up
//             runs), and the same for javascript and bash;
//   create    Sandbox.create() → first runCode('1+1') resolved (--creates, one at a time),
//             with create() alone beside it. The first execution waits for the python kernel
//             the agent starts at boot, unless the sandbox came from the code-interpreter warm
//             pool (warren serve --warm-pool-code-interpreter, default 1) with its kernels up.
//             Before each create the benchmark waits for that pool to be full (GET /metrics)
//             and then --settle-ms more, so that the pooled container's kernels have started
//             and the machine is quiet again; with the pool off (--serve-arg=
//             --warm-pool-code-interpreter=0) it waits the same. --settle-ms 0: back to back.
// Needs the warren/code-interpreter image (bin/warren image build code-interpreter).
import { createRequire } from 'node:module'
import { parseArgs } from 'node:util'
import os from 'node:os'
import { WarrenServer } from '../../test/e2e/server/harness.mjs'
import { reporter } from '../stats.mjs'

const { values: opt } = parseArgs({
  options: {
    runs: { type: 'string', default: '200' },
    creates: { type: 'string', default: '10' },
    json: { type: 'boolean', default: false },
    'settle-ms': { type: 'string', default: '3000' },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})

const require = createRequire(new URL('../../test/e2e/package.json', import.meta.url))
const { Sandbox } = await import(require.resolve('@e2b/code-interpreter'))

const now = () => performance.now()
const CI = 'code-interpreter-v1'

/** Waits until the server's code-interpreter warm pool holds what it keeps (GET /metrics). */
async function poolFull() {
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
    const text = await (await server.api('/metrics')).text()
    const gauge = (name) => Number(text.match(new RegExp(`^${name}\\{template="${CI}"\\} (\\d+)$`, 'm'))?.[1] ?? 0)
    if (gauge('warren_warm_pool_ready') >= gauge('warren_warm_pool_size')) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('the code-interpreter warm pool did not fill within 60 s')
}

/** Whether a sandbox came from the warm pool: its "sandbox created" event says pool=true. */
async function fromPool(id) {
  const { logs } = await (await server.api(`/v2/sandboxes/${id}/logs?search=sandbox%20created`)).json()
  return logs.some((l) => l.message === 'sandbox created' && l.fields?.pool === 'true')
}
const results = {}
const report = reporter(results, 44, opt.json)

const server = new WarrenServer({ name: `warren-bench-ci-${process.pid}`, args: opt['serve-arg'] })
await server.start()
Object.assign(process.env, server.sdkEnv)
const made = []
try {
  if (!opt.json) console.log(`warren serve on ${server.url}; ${os.cpus().length} CPUs, load ${os.loadavg()[0].toFixed(1)}`)
  const sbx = await Sandbox.create({ timeoutMs: 600_000 })
  made.push(sbx.sandboxId)
  const check = (ex, want) => {
    if (ex.error || ex.text !== want) throw new Error(`unexpected execution: ${JSON.stringify(ex)}`)
  }
  for (const [key, language, code, want] of [
    ['runCode_python', undefined, '1+1', '2'],
    ['runCode_javascript', 'javascript', '1+1', '2'],
  ]) {
    for (let i = 0; i < 20; i++) check(await sbx.runCode(code, { language }), want)
    const xs = []
    for (let i = 0; i < Number(opt.runs); i++) {
      const t = now()
      const ex = await sbx.runCode(code, { language })
      xs.push(now() - t)
      check(ex, want)
    }
    report(key, `runCode('1+1') ${language ?? 'python'}`, xs)
  }
  const bash = []
  for (let i = 0; i < Number(opt.runs); i++) {
    const t = now()
    const ex = await sbx.runCode('echo 2', { language: 'bash' })
    bash.push(now() - t)
    if (ex.logs.stdout.join('') !== '2\n') throw new Error(`unexpected bash execution: ${JSON.stringify(ex)}`)
  }
  report('runCode_bash', "runCode('echo 2') bash", bash)

  const creates = []
  const firsts = []
  const settle = Number(opt['settle-ms'])
  const pooled = []
  for (let i = 0; i < Number(opt.creates); i++) {
    if (settle > 0) {
      await poolFull()
      await new Promise((r) => setTimeout(r, settle))
    }
    const t = now()
    const s = await Sandbox.create({ timeoutMs: 120_000 })
    made.push(s.sandboxId)
    creates.push(now() - t)
    check(await s.runCode('1+1'), '2')
    firsts.push(now() - t)
    pooled.push(await fromPool(s.sandboxId))
    await s.kill()
  }
  report('create', 'Sandbox.create()', creates)
  report('create_first_runCode', "Sandbox.create() → first runCode('1+1')", firsts)
  results.from_pool = pooled.filter(Boolean).length
  if (!opt.json) console.log(`${results.from_pool} of ${pooled.length} sandboxes came from the warm pool`)
  if (opt.json) console.log(JSON.stringify(results, null, 2))
} finally {
  await Promise.all(made.map((id) => Sandbox.kill(id).catch(() => {})))
  const problems = await server.dispose()
  if (problems.length) console.error(`bench: ${problems.join('; ')}`)
}
