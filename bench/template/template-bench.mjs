// template-bench.mjs: benchmark template builds through the official e2b SDK (2.51), as users
// run them (Template.build against E2B_API_URL pointing at the server).
//
//   node bench/template/template-bench.mjs [--n 10] [--json]
//
// It starts its own server (test/e2e/server/harness.mjs: free 127.0.0.1 port, fresh state dir,
// its own container label), deletes every template it built, and removes what is left at the
// end. The template has every step kind (RUN, RUN as root, COPY of a small context with a mode,
// ENV, WORKDIR, USER) on warren/base. Prints, n runs each:
//   rebuild   Template.build() of the unchanged template: every step comes from the cache;
//             beside it `docker build` of a one-step Dockerfile fully cached (the engine's floor);
//   first     a build request of a template new in one RUN step → build ready →
//             Sandbox.create() → first commands.run('true') resolved, with the build, the create
//             and the first command apart.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import os from 'node:os'
import { sdk, startServer } from '../server.mjs'
import { reporter } from '../stats.mjs'

const { values: opt } = parseArgs({
  options: {
    n: { type: 'string', default: '10' },
    json: { type: 'boolean', default: false },
  },
})
const n = Number(opt.n)

const { Template, Sandbox } = await sdk('e2b')

const now = () => performance.now()
const uid = () => randomBytes(4).toString('hex')
const results = {}
const report = reporter(results, 52, opt.json)
const note = (m) => !opt.json && console.log(m)

const server = await startServer({ name: `warren-bench-${process.pid}`, args: [] })

const ctxDir = mkdtempSync(join(tmpdir(), 'warren-bench-tpl-'))
writeFileSync(join(ctxDir, 'app.sh'), '#!/bin/sh\necho app\n')
const dockerDir = mkdtempSync(join(tmpdir(), 'warren-bench-docker-'))
const dockerTag = `warren-bench-floor:${uid()}`
const templates = []

const everyStep = (marker) =>
  Template({ fileContextPath: ctxDir })
    .fromImage('warren/base')
    .runCmd(`echo ${marker} > /tmp/marker`)
    .runCmd('mkdir -p /opt/tool', { user: 'root' })
    .copy('app.sh', '/opt/tool/app.sh', { mode: 0o755 })
    .setEnvs({ BENCH: '1' })
    .setWorkdir('/home/user')
    .setUser('user')

async function build(tpl, name) {
  if (!templates.includes(name)) templates.push(name)
  const t0 = now()
  await Template.build(tpl, name)
  return now() - t0
}

try {
  note(`template bench — ${new Date().toISOString()} — ${os.cpus().length} × ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`)

  const name = `bench-rebuild-${uid()}`
  const cold = await build(everyStep(name), name)
  note(`${'first build of the every-step template'.padEnd(52)} ${cold.toFixed(0)} ms`)
  results.first_build_ms = cold
  const rebuilds = []
  for (let i = 0; i < n; i++) rebuilds.push(await build(everyStep(name), name))
  report('rebuild_unchanged', 'Template.build() unchanged (all steps cached)', rebuilds)

  writeFileSync(join(dockerDir, 'Dockerfile'), `FROM warren/base\nRUN echo ${uid()} > /tmp/floor\n`)
  const dockerBuild = () => execFileSync('docker', ['build', '-q', '-t', dockerTag, dockerDir], { stdio: 'pipe' })
  dockerBuild()
  const floor = []
  for (let i = 0; i < n; i++) {
    const t0 = now()
    dockerBuild()
    floor.push(now() - t0)
  }
  report('docker_build_cached', '  engine floor: `docker build` fully cached (CLI)', floor)

  const totals = []
  const builds = []
  const creates = []
  const firsts = []
  for (let i = 0; i < n; i++) {
    const fresh = `bench-first-${uid()}`
    const t0 = now()
    await build(Template().fromImage('warren/base').runCmd(`echo ${uid()} > /tmp/id`), fresh)
    const t1 = now()
    const sbx = await Sandbox.create(fresh)
    const t2 = now()
    await sbx.commands.run('true')
    const t3 = now()
    totals.push(t3 - t0)
    builds.push(t1 - t0)
    creates.push(t2 - t1)
    firsts.push(t3 - t2)
    await sbx.kill()
    await server.api(`/templates/${fresh}`, { method: 'DELETE' })
  }
  report('request_to_first_cmd', 'build request → first run(\'true\') in a sandbox', totals)
  report('request_to_ready', '  of which the build (one new RUN step)', builds)
  report('create', '  of which Sandbox.create()', creates)
  report('first_cmd', '  of which the first run(\'true\')', firsts)
} catch (e) {
  console.error(`bench failed: ${e.stack}\n--- server log tail:\n${await server.logTail(30)}`)
  process.exitCode = 1
} finally {
  for (const t of templates) await server.api(`/templates/${t}`, { method: 'DELETE' }).catch(() => {})
  try {
    execFileSync('docker', ['rmi', dockerTag], { stdio: 'pipe' })
  } catch {}
  rmSync(ctxDir, { recursive: true, force: true })
  rmSync(dockerDir, { recursive: true, force: true })
  const problems = await server.dispose()
  if (problems.length) console.error(`bench: ${problems.join('; ')}`)
}
if (opt.json) console.log(JSON.stringify(results, null, 2))
