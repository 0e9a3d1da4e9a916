// codeinterp-bench.mjs: benchmark the code interpreter through `warren serve` with the npm
// @e2b/code-interpreter SDK, the way users reach it (E2B_API_URL/E2B_SANDBOX_URL).
//
//   node bench/codeinterp/codeinterp-bench.mjs [--runs 200] [--creates 10] [--json]
//                                              [--serve-arg=... ...]
//
// It starts its own server (test/e2e/server/harness.mjs: free 127.0.0.1 port, fresh state dir,
// its own container label) and removes every sandbox and container it made at the end. Prints:
//   runCode   sbx.runCode('1+1') round trip on a warm python context (--runs, after 20 warm-up
//             runs), and the same for javascript and bash;
//   create    Sandbox.create() → first runCode('1+1') resolved (--creates, one at a time),
//             with create() alone beside it. The first execution waits for the python kernel
//             the agent starts at boot.
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
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
})

const require = createRequire(new URL('../../test/e2e/package.json', import.meta.url))
const { Sandbox } = await import(require.resolve('@e2b/code-interpreter'))

const now = () => performance.now()
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
  for (let i = 0; i < Number(opt.creates); i++) {
    const t = now()
    const s = await Sandbox.create({ timeoutMs: 120_000 })
    made.push(s.sandboxId)
    creates.push(now() - t)
    check(await s.runCode('1+1'), '2')
    firsts.push(now() - t)
    await s.kill()
  }
  report('create', 'Sandbox.create()', creates)
  report('create_first_runCode', "Sandbox.create() → first runCode('1+1')", firsts)
  if (opt.json) console.log(JSON.stringify(results, null, 2))
} finally {
  await Promise.all(made.map((id) => Sandbox.kill(id).catch(() => {})))
  const problems = await server.dispose()
  if (problems.length) console.error(`bench: ${problems.join('; ')}`)
}
