// End-to-end tests of templates: E2B's Template API (e2b 2.51) against a running `warren serve`.
//
// Needs E2B_API_URL, E2B_API_KEY, E2B_SANDBOX_URL and E2B_DOMAIN pointing at the server, and the
// warren/base image on its engine. Run with: node --test server/templates.test.mjs
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync, mkdirSync, chmodSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Template, Sandbox, BuildError, waitForFile } from 'e2b'
import { WARREN_BIN } from './harness.mjs'
import { waitFor } from './helpers.mjs'

for (const v of ['E2B_API_URL', 'E2B_API_KEY']) {
  if (!process.env[v]) throw new Error(`${v} must point at a running warren serve`)
}
const uid = () => randomBytes(4).toString('hex')
const run = promisify(execFile)
const imageExists = (ref) => run('docker', ['image', 'inspect', ref]).then(() => true, () => false)
// layersRunning returns the engine's images (step layers included) made by a RUN of cmd.
async function layersRunning(cmd) {
  const ids = (await run('docker', ['images', '-aq'])).stdout.split('\n').filter(Boolean)
  const { stdout } = await run('docker', ['image', 'inspect', '--format', '{{.Id}} {{json .ContainerConfig.Cmd}}', ...new Set(ids)])
  return stdout.split('\n').filter((l) => l.includes(cmd)).map((l) => l.split(' ')[0])
}
const codeInterpreterBuilt = await imageExists('warren/code-interpreter')
// kube-run.sh builds this suite on buildkitd (WARREN_E2E_BUILDKIT=1): images are in the registry
// of WARREN_REGISTRY, and BuildKit's step cache is its own (no images of steps to look for).
const buildkit = process.env.WARREN_E2E_BUILDKIT === '1'
// inRegistry reports whether the server's registry has the image ref (name:tag).
async function inRegistry(ref) {
  const prefix = process.env.WARREN_REGISTRY
  const host = prefix.split('/')[0]
  const [repo, tag] = ref.split(':')
  const path = [prefix.slice(host.length + 1), repo].filter(Boolean).join('/')
  const res = await fetch(`http://${host}/v2/${path}/manifests/${tag}`, {
    method: 'HEAD', headers: { Accept: 'application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json' },
  })
  return res.status === 200
}
const api = (path, init = {}) =>
  fetch(process.env.E2B_API_URL + path, {
    ...init,
    headers: { 'X-API-Key': process.env.E2B_API_KEY, 'Content-Type': 'application/json', ...init.headers },
  })

describe('templates', () => {
  const ctxDir = mkdtempSync(join(tmpdir(), 'warren-tpl-'))
  const created = [] // template names to delete afterwards
  const sandboxes = []
  const name = `e2e-every-step-${uid()}`

  before(() => {
    mkdirSync(join(ctxDir, 'app'))
    writeFileSync(join(ctxDir, 'app', 'run.sh'), '#!/bin/sh\necho run\n')
    chmodSync(join(ctxDir, 'app', 'run.sh'), 0o644)
    writeFileSync(join(ctxDir, 'app', 'data.txt'), 'data\n')
    writeFileSync(join(ctxDir, 'hello.txt'), 'hello from the context\n')
  })

  after(async () => {
    for (const s of sandboxes) await s.kill().catch(() => {})
    for (const n of created) await api(`/templates/${n}`, { method: 'DELETE' }).catch(() => {})
    rmSync(ctxDir, { recursive: true, force: true })
  })

  // A build expected to succeed: the SDK's BuildError carries the failed step's stack in place of
  // its own, so the test runner prints no message; this names the reason the server gave.
  const built = (...args) => Template.build(...args).catch((e) => {
    throw new Error(`the build failed: ${e.name}: ${e.message}`, { cause: e })
  })

  // Every step kind the SDK sends: RUN (plain and as a user), COPY (with user and mode, and
  // without), ENV, WORKDIR, USER, plus start and ready commands.
  const everyStep = () =>
    Template({ fileContextPath: ctxDir })
      .fromImage('warren/base')
      .runCmd('whoami > /tmp/build-user && pwd > /tmp/build-pwd')
      .runCmd('mkdir -p /opt/made && whoami > /opt/made/who', { user: 'root' })
      .copy('app', '/opt/app', { user: 'user', mode: 0o755 })
      .copy('hello.txt', '/home/user/hello.txt')
      .setEnvs({ GREETING: 'hello world', EXTRA: 'x' })
      .makeDir('/home/user/work')
      .setWorkdir('/home/user/work')
      .setUser('root')
      .setStartCmd(
        'echo "$GREETING from $(whoami) in $(pwd)" > /tmp/started; sleep 2; touch /tmp/ready; exec sleep infinity',
        waitForFile('/tmp/ready'),
      )

  it('builds a template with every step kind, with logs as they happen', async () => {
    created.push(name)
    const logs = []
    const info = await built(everyStep(), name, { cpuCount: 1, memoryMB: 512, onBuildLogs: (e) => logs.push(e) })
    assert.equal(info.name, name)
    assert.ok(info.templateId && info.buildId)
    const text = logs.map((e) => e.message).join('\n')
    assert.match(text, /RUN/)
    assert.match(text, /COPY/)
  })

  it('rebuilds an unchanged template from the cache', async () => {
    const logs = []
    await built(everyStep(), name, { onBuildLogs: (e) => logs.push(e) })
    assert.ok(logs.some((e) => e.message === 'CACHED'), 'no step came from the cache')
    assert.ok(!logs.some((e) => e.message.startsWith('Step') && /Running in/.test(e.message)))
  })

  it('knows which names exist', async () => {
    assert.equal(await Template.exists(name), true)
    assert.equal(await Template.aliasExists(name), true)
    assert.equal(await Template.exists(`no-such-${uid()}`), false)
  })

  it('starts sandboxes of the template: start and ready commands, files, env, user, workdir', async () => {
    const start = Date.now()
    const sbx = await Sandbox.create(name)
    sandboxes.push(sbx)
    const took = Date.now() - start
    // The ready command waits for the start command's /tmp/ready, written after 2 s.
    assert.ok(took >= 1500, `create returned after ${took} ms, before the ready command could pass`)
    const info = await sbx.getInfo()
    assert.equal(info.cpuCount, 1)
    assert.equal(info.memoryMB, 512)

    const run = async (cmd) => (await sbx.commands.run(cmd)).stdout.trim()
    assert.equal(await run('test -f /tmp/ready && echo ready'), 'ready')
    assert.equal(await run('cat /tmp/started'), 'hello world from root in /home/user/work')
    assert.match(await run('ps -eo args'), /sleep infinity/)
    assert.equal(await run('whoami'), 'root')
    assert.equal(await run('pwd'), '/home/user/work')
    assert.equal(await run('echo "$GREETING/$EXTRA"'), 'hello world/x')
    assert.equal(await run('cat /tmp/build-user /tmp/build-pwd /opt/made/who'), 'user\n/home/user\nroot')
    assert.equal(await run('stat -c "%U %a" /opt/app/run.sh /opt/app/data.txt /home/user/hello.txt'), 'user 755\nuser 755\nuser 644')
    assert.equal(await run('cat /home/user/hello.txt'), 'hello from the context')
    assert.equal(await run('/opt/app/run.sh'), 'run')
  })

  it('builds on another template (fromTemplate): its files, env, user and workdir carry over', async () => {
    const child = `e2e-child-${uid()}`
    created.push(child)
    await built(Template().fromTemplate(name).runCmd('echo "child of $GREETING" > child.txt'), child)
    const sbx = await Sandbox.create(child)
    sandboxes.push(sbx)
    const run = async (cmd) => (await sbx.commands.run(cmd)).stdout.trim()
    assert.equal(await run('cat /home/user/work/child.txt'), 'child of hello world')
    assert.equal(await run('stat -c %U /home/user/work/child.txt'), 'root')
    assert.equal(await run('/opt/app/run.sh'), 'run')
    assert.equal(await run('whoami; pwd'), 'root\n/home/user/work')
  })

  it('builds on the built-in templates and on a snapshot (fromTemplate)', async () => {
    const onBase = `e2e-on-base-${uid()}`
    created.push(onBase)
    await built(Template().fromTemplate('base').runCmd('echo on-base > /tmp/on-base'), onBase)
    const a = await Sandbox.create(onBase)
    sandboxes.push(a)
    assert.equal((await a.commands.run('cat /tmp/on-base; whoami')).stdout, 'on-base\nuser\n')

    // On BuildKit the sandbox's image was pulled from the registry, and its node does not hold
    // all of its compressed layers (containerd fetches no layer it has unpacked already): the
    // snapshot reaches the registry as its own layer, the base's mounted from the repository it
    // was pulled from.
    await a.files.write('/home/user/from-snapshot.txt', 'kept in the snapshot')
    const snap = await a.createSnapshot()
    const onSnap = `e2e-on-snap-${uid()}`
    created.push(onSnap)
    await built(Template().fromTemplate(snap.snapshotId).runCmd('echo on-snap > /tmp/on-snap'), onSnap)
    const b = await Sandbox.create(onSnap)
    sandboxes.push(b)
    assert.equal((await b.commands.run('cat /home/user/from-snapshot.txt; echo; cat /tmp/on-snap')).stdout, 'kept in the snapshot\non-snap\n')
    await Sandbox.deleteSnapshot(snap.snapshotId)
  })

  it('builds on code-interpreter-v1: its sandboxes still run code', { skip: !codeInterpreterBuilt && 'warren/code-interpreter is not built' }, async () => {
    const { Sandbox: CodeSandbox } = await import('@e2b/code-interpreter')
    const onCi = `e2e-on-ci-${uid()}`
    created.push(onCi)
    await built(Template().fromTemplate('code-interpreter-v1').runCmd('echo 41 > /tmp/n'), onCi)
    const sbx = await CodeSandbox.create(onCi)
    sandboxes.push(sbx)
    const ex = await sbx.runCode('int(open("/tmp/n").read()) + 1')
    assert.equal(ex.error, undefined)
    assert.equal(ex.text, '42')
  })

  it('warren template build: a Dockerfile built through the API, with its progress', async () => {
    const df = `e2e-dockerfile-${uid()}`
    created.push(df)
    const dir = mkdtempSync(join(tmpdir(), 'warren-df-'))
    try {
      writeFileSync(join(dir, 'greeting.txt'), 'from the Dockerfile\n')
      writeFileSync(join(dir, 'Dockerfile'), [
        'FROM warren/base',
        'RUN echo built > /tmp/built',
        'COPY --chmod=640 greeting.txt /srv/greeting.txt',
        'ENV PHASE=dockerfile',
        'WORKDIR /srv',
        '',
      ].join('\n'))
      const { stdout } = await run(WARREN_BIN, ['template', 'build', '-f', join(dir, 'Dockerfile'), '--name', df, dir], {
        env: { ...process.env, WARREN_API_KEY: process.env.E2B_API_KEY },
      }).catch((e) => assert.fail(`warren template build: ${e.message}\n${e.stdout}\n${e.stderr}`))
      assert.match(stdout, new RegExp(`Building ${df}`))
      assert.match(stdout, /RUN/)
      const sbx = await Sandbox.create(df)
      sandboxes.push(sbx)
      const out = async (cmd, opts) => (await sbx.commands.run(cmd, opts)).stdout.trim()
      // As in Docker the steps ran as root; the sandbox's user is "user" (no USER line), in /srv.
      assert.equal(await out('whoami; pwd; echo $PHASE; cat /tmp/built'), 'user\n/srv\ndockerfile\nbuilt')
      assert.equal(await out('stat -c "%a %U" greeting.txt; cat greeting.txt', { user: 'root' }), '640 root\nfrom the Dockerfile')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('builds in the background, building right after the start', async () => {
    const bg = `e2e-bg-${uid()}`
    created.push(bg)
    const t = Template().fromImage('warren/base').runCmd(`sleep 2 && echo ${uid()} > /tmp/bg`)
    const info = await Template.buildInBackground(t, bg)
    const first = await Template.getBuildStatus(info)
    assert.equal(first.status, 'building')
    let st = first
    for (let i = 0; i < 300 && (st.status === 'building' || st.status === 'waiting'); i++) {
      await new Promise((r) => setTimeout(r, 200))
      st = await Template.getBuildStatus(info)
    }
    assert.equal(st.status, 'ready')
    const all = await Template.getBuildStatus(info, { logsOffset: 0 })
    assert.ok(all.logEntries.length > 0)
  })

  it('reports a failing build: the step, its output, the exit code', async () => {
    const bad = `e2e-fail-${uid()}`
    created.push(bad)
    const logs = []
    const fine = `echo fine-${uid()}`
    const t = Template().fromImage('warren/base').runCmd(fine).runCmd('echo about-to-fail && exit 7').runCmd('echo never')
    await assert.rejects(Template.build(t, bad, { onBuildLogs: (e) => logs.push(e) }), (err) => {
      assert.ok(err instanceof BuildError, `${err}`)
      assert.equal(err.message, "failed to run command 'echo about-to-fail && exit 7': exit status 7")
      return true
    })
    const text = logs.map((e) => e.message).join('\n')
    assert.match(text, /about-to-fail/)
    assert.doesNotMatch(text, /^never$/m)
    await assert.rejects(Sandbox.create(bad))
    if (buildkit) {
      assert.equal((await api(`/templates/${bad}`, { method: 'DELETE' })).status, 204)
      return
    }
    // The layer of the step that passed is the next build's cache; deleting the template takes it.
    assert.equal((await layersRunning(fine)).length, 1, 'no cache layer of the step that passed')
    assert.equal((await api(`/templates/${bad}`, { method: 'DELETE' })).status, 204)
    assert.deepEqual(await layersRunning(fine), [], 'the failed build left its layer behind')
  })

  // E2B's SDK tests (build.test.ts, test_build.py): a folder with a file and links relative,
  // absolute and dangling, copied with a glob; and the other shapes of copy.
  it('copies as E2B does: globs, several sources, links kept or resolved, forceUpload, owner and mode; setUser makes the user', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'warren-copy-'))
    const folder = join(dir, 'folder')
    mkdirSync(folder)
    writeFileSync(join(folder, 'test.txt'), 'This is a test file.')
    symlinkSync('test.txt', join(folder, 'symlink.txt'))
    symlinkSync(join(folder, 'test.txt'), join(folder, 'symlink2.txt'))
    symlinkSync('12345test.txt', join(folder, 'symlink3.txt'))
    mkdirSync(join(dir, 'src', 'lib'), { recursive: true })
    writeFileSync(join(dir, 'src', 'a.ts'), 'a')
    writeFileSync(join(dir, 'src', 'lib', 'b.ts'), 'b')
    writeFileSync(join(dir, 'src', 'lib', 'skip.js'), 'no')
    writeFileSync(join(dir, 'one.txt'), '1')
    writeFileSync(join(dir, 'two.txt'), '2')
    const copyName = `e2e-copy-${uid()}`
    created.push(copyName)
    const t = () => Template({ fileContextPath: dir })
      .fromBaseImage()
      .copy('folder/*', 'folder', { forceUpload: true })
      .runCmd('cat folder/test.txt folder/symlink.txt')
      .copy('folder/symlink.txt', 'resolved.txt', { resolveSymlinks: true })
      .copy('folder/symlink2.txt', '/opt/links/', {})
      .copy(['one.txt', 'two.txt'], '/opt/many/')
      .copy('src/**/*.ts', '/opt/ts/')
      .copy('one.txt', '/opt/one-root.txt', { user: 'root', mode: 0o600 })
      .copy('src', '/opt/src', { mode: 0o750 })
      .setUser('maker') // made, as on E2B, and the owner of what is copied next
      .copy('two.txt', 'mine.txt')
    try {
      for (let i = 0; i < 2; i++) {
        const logs = []
        await built(t(), copyName, { onBuildLogs: (e) => logs.push(e.message) })
        assert.ok(logs.includes("Uploaded 'folder/*'"), `forceUpload did not upload (build ${i + 1}): ${logs.join('\n')}`)
      }
      const sbx = await Sandbox.create(copyName)
      sandboxes.push(sbx)
      const out = async (cmd) => (await sbx.commands.run(cmd, { cwd: '/home/user', user: 'root' })).stdout.trim()
      assert.equal(await out('for f in folder/*; do if [ -L $f ]; then echo "$f -> $(readlink $f)"; else echo "$f $(stat -c "%F %U %a" $f)"; fi; done'), [
        `folder/symlink.txt -> test.txt`,
        `folder/symlink2.txt -> ${join(folder, 'test.txt')}`,
        `folder/symlink3.txt -> 12345test.txt`,
        `folder/test.txt regular file user 644`,
      ].join('\n'))
      assert.equal(await out('stat -c "%F %U" folder resolved.txt && cat resolved.txt'), 'directory user\nregular file user\nThis is a test file.')
      assert.equal(await out('readlink /opt/links/symlink2.txt'), join(folder, 'test.txt'))
      assert.equal(await out('cat /opt/many/one.txt /opt/many/two.txt'), '12')
      assert.equal(await out('cd /opt/ts && find . -type f | sort'), './a.ts\n./lib/b.ts')
      assert.equal(await out('stat -c "%U:%G %a" /opt/one-root.txt /opt/src/a.ts /opt/src/lib /opt/src/lib/b.ts'), 'root:root 600\nuser:user 750\nuser:user 750\nuser:user 750')
      assert.equal((await sbx.commands.run('whoami && stat -c "%U:%G" /home/user/mine.txt')).stdout.trim(), 'maker\nmaker:maker')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("says why a step failed in E2B's words", async () => {
    const bad = `e2e-nouser-${uid()}`
    created.push(bad)
    await assert.rejects(Template.build(Template().fromBaseImage().runCmd('whoami', { user: 'root123' }), bad), (err) => {
      assert.ok(err instanceof BuildError, `${err}`)
      assert.match(err.message, /failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'/)
      return true
    })
  })

  it('refuses bad input with clear messages', async () => {
    await assert.rejects(Template.build(Template().fromImage('warren/base').runCmd('true'), 'Bad Name!'), /invalid template name/)
    // What the server cannot honour is refused, never dropped: registry credentials, more free
    // disk than a sandbox gets.
    const private_ = `e2e-private-${uid()}`
    created.push(private_)
    await assert.rejects(Template.build(Template().fromImage('warren/base', { username: 'u', password: 'p' }).runCmd('true'), private_),
      /fromImageRegistry is not supported/)
    await assert.rejects(Template.build(Template().fromImage('warren/base').runCmd('true'), `e2e-disk-${uid()}`, { minFreeDiskMb: 1 << 30 }),
      /minFreeDiskMb 1073741824 is more than/)
    const res = await api('/v3/templates', { method: 'POST', body: JSON.stringify({ name: `e2e-bad-${uid()}` }) })
    assert.equal(res.status, 202)
    const { templateID, buildID } = await res.json()
    created.push(templateID)
    const start = (body) => api(`/v2/templates/${templateID}/builds/${buildID}`, { method: 'POST', body: JSON.stringify(body) })
    let r = await start({ fromImage: 'warren/base', steps: [{ type: 'FROBNICATE', args: [] }] })
    assert.equal(r.status, 400)
    assert.match((await r.json()).message, /unknown step type 'FROBNICATE'/)
    r = await start({ fromImage: 'warren/base', steps: [{ type: 'COPY', args: ['a', '/a', '', ''] }] })
    assert.equal(r.status, 400)
    assert.match((await r.json()).message, /filesHash is missing/)
    r = await start({ fromImage: 'warren/base', steps: [{ type: 'COPY', args: ['a', '/a', '', ''], filesHash: 'ab'.repeat(32) }] })
    assert.equal(r.status, 400)
    assert.match((await r.json()).message, /were not uploaded/)
  })

  it('tags builds, lists, and removes tags', async () => {
    const tagged = `e2e-tags-${uid()}`
    created.push(tagged)
    const t = Template().fromImage('warren/base').runCmd('echo v1 > /tmp/version')
    const info = await built(t, `${tagged}:v1`)
    const assigned = await Template.assignTags(`${tagged}:v1`, ['prod', 'stable'])
    assert.equal(assigned.buildId, info.buildId)
    let tags = (await Template.getTags(tagged)).map((x) => x.tag).sort()
    assert.deepEqual(tags, ['prod', 'stable', 'v1'])
    await Template.removeTags(tagged, 'stable')
    tags = (await Template.getTags(tagged)).map((x) => x.tag).sort()
    assert.deepEqual(tags, ['prod', 'v1'])
    const sbx = await Sandbox.create(`${tagged}:prod`)
    sandboxes.push(sbx)
    assert.equal((await sbx.commands.run('cat /tmp/version')).stdout.trim(), 'v1')
  })

  it('removes the images of superseded builds and of deleted templates from the registry', { skip: !buildkit && 'Docker builds: the next test' }, async () => {
    const gone = `e2e-gone-${uid()}`
    const image = (info) => `warren-template/${info.templateId}:${info.buildId}`
    const first = await built(Template().fromImage('warren/base').runCmd(`echo ${uid()} > /tmp/id`), gone)
    assert.equal(await inRegistry(image(first)), true, `${image(first)} is not in the registry`)
    const second = await built(Template().fromImage('warren/base').runCmd(`echo ${uid()} > /tmp/id`), gone)
    await waitFor(async () => !(await inRegistry(image(first))), { timeoutMs: 15_000, what: `superseded ${image(first)} to be removed` })
    assert.equal((await api(`/templates/${gone}`, { method: 'DELETE' })).status, 204)
    assert.equal(await inRegistry(image(second)), false, `${image(second)} of a deleted template still there`)
    assert.equal(await inRegistry('warren/base:latest'), true)
  })

  it('removes the images of superseded builds and of deleted templates, step layers included', { skip: buildkit && 'BuildKit: the test before' }, async () => {
    const gone = `e2e-gone-${uid()}`
    // A build's own layers: from its image down to the step that makes it unique. The layers
    // below are the cache other templates from warren/base share, and may stay.
    const own = async (info, marker) => {
      const { stdout } = await run('docker', ['history', '--no-trunc', '--format', '{{.ID}} {{.CreatedBy}}',
        `warren-template/${info.templateId}:${info.buildId}`])
      const lines = stdout.split('\n')
      const end = lines.findIndex((l) => l.includes(marker))
      assert.ok(end >= 0, `no layer of the build runs ${marker}:\n${stdout}`)
      return lines.slice(0, end + 1).map((l) => l.split(' ')[0])
    }
    const one = uid()
    const two = uid()
    const first = await built(Template().fromImage('warren/base').runCmd(`echo ${one} > /tmp/id`), gone)
    const firstLayers = await own(first, one)
    const second = await built(Template().fromImage('warren/base').runCmd(`echo ${two} > /tmp/id`), gone)
    const secondLayers = await own(second, two)
    // The superseded build is pruned right after the new one is reported ready.
    for (const id of firstLayers) {
      await waitFor(async () => !(await imageExists(id)), { timeoutMs: 15_000, what: `superseded layer ${id} to be removed` })
    }
    const res = await api(`/templates/${gone}`, { method: 'DELETE' })
    assert.equal(res.status, 204)
    for (const id of secondLayers) assert.equal(await imageExists(id), false, `layer ${id} of a deleted template still there`)
    assert.equal(await imageExists('warren/base'), true)
  })
})
