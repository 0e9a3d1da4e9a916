// Security holes of issue 10, end to end with the official SDK against a private `warren serve`
// with two teams' keys. Each helper's tests carry their item in the name.
//
// [templates] team B cannot start a sandbox from team A's snapshot through its image: not by an
// image ID prefix (what the engine itself accepts), the full ID, or the image's name; a local
// image by its full reference still works.
// [limits] a template asking for more CPUs or memory than --max-cpu-count/--max-memory-mb is a
// 400 naming the limit.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { WARREN_BIN, useServer } from './harness.mjs'
import { uid, waitFor } from './helpers.mjs'

const MAX_CPUS = 1
const MAX_MEMORY_MB = 1024
const handle = await useServer({ private: true, args: ['--max-cpu-count', String(MAX_CPUS), '--max-memory-mb', String(MAX_MEMORY_MB)] })
const { Sandbox, Template } = await import('e2b')
const run = promisify(execFile)
const docker = async (...args) => (await run('docker', args)).stdout.trim()
const imageId = (ref) => docker('image', 'inspect', '--format', '{{.Id}}', ref).catch(() => '')

const api = (key, method, path, body) =>
  fetch(handle.url + path, {
    method,
    headers: { 'X-API-Key': key, 'Content-Type': 'application/json' },
    body: body && JSON.stringify(body),
  })

describe('security', () => {
  let keyA, keyB // team default (the server's key) and team "other"
  const sandboxes = []
  const localImage = `e2e-local-${uid()}:1`

  before(async () => {
    keyA = handle.apiKey
    const out = await run(WARREN_BIN, ['keys', 'create', '--team', 'other', ...handle.server.storeFlags])
    keyB = out.stdout.trim()
    assert.match(keyB, /^e2b_[0-9a-f]+$/)
    await docker('tag', 'warren/base', localImage) // a user's own local image
  })

  after(async () => {
    for (const s of sandboxes) await s.kill().catch(() => {})
    await docker('rmi', localImage).catch(() => {})
  })

  it("[templates] team B cannot create from team A's snapshot by image ID prefix, full ID or image name", async () => {
    const src = await Sandbox.create('base', { apiKey: keyA })
    sandboxes.push(src)
    await src.files.write('/home/user/secret.txt', 'team A only')
    const snap = await src.createSnapshot()
    const image = `warren/snapshot:${snap.snapshotId}`
    // On the Kubernetes engine the snapshot is committed on a node and copied into the builder's
    // Docker engine (where templates are built on it, and prefixes resolve) in the background.
    const id = await waitFor(() => imageId(image), { timeoutMs: 60_000, intervalMs: 250, what: `the snapshot's image ${image} on the engine` })
    assert.match(id, /^sha256:[0-9a-f]{64}$/, `the snapshot's image ${image} is not on the engine`)
    const hex = id.slice('sha256:'.length)
    // The shortest prefix the engine itself takes for this image: what the audit used.
    let prefix
    for (let n = 2; n <= 12 && !prefix; n++) if ((await imageId(hex.slice(0, n))) === id) prefix = hex.slice(0, n)
    assert.ok(prefix, 'no short prefix of the image ID names it on the engine')

    const refused = [prefix, hex.slice(0, 12), id, hex, image, `docker.io/${image}`, snap.snapshotId]
    for (const ref of refused) {
      await assert.rejects(Sandbox.create(ref, { apiKey: keyB }), (e) => /not found|invalid/i.test(e.message), `team B created from ${ref}`)
      const res = await api(keyB, 'POST', '/v2/sandboxes', { templateID: ref })
      const body = await res.json()
      assert.ok([400, 404].includes(res.status), `POST /v2/sandboxes ${ref}: ${res.status} ${JSON.stringify(body)}`)
      assert.equal(body.code, res.status)
      assert.equal(typeof body.message, 'string')
    }
    // Not even team A reaches its snapshot by the image's ID: only by the snapshot's ID or name.
    await assert.rejects(Sandbox.create(prefix, { apiKey: keyA }), /not found|invalid/i)
    const own = await Sandbox.create(snap.snapshotId, { apiKey: keyA })
    sandboxes.push(own)
    assert.equal(await own.files.read('/home/user/secret.txt'), 'team A only')
  })

  it('[templates] a local image by its full reference still works, for either team', async () => {
    for (const [key, ref] of [[keyB, localImage], [keyA, `docker.io/library/${localImage}`]]) {
      const sbx = await Sandbox.create(ref, { apiKey: key })
      sandboxes.push(sbx)
      assert.equal((await sbx.commands.run('echo ok')).stdout, 'ok\n')
    }
    const id = await imageId(localImage)
    await assert.rejects(Sandbox.create(id.slice(7, 19), { apiKey: keyB }), /not found|invalid/i, 'a local image by ID prefix')
  })

  it('[limits] a template over --max-cpu-count or --max-memory-mb is a 400 naming the limit', async () => {
    const name = `e2e-huge-${uid()}`
    for (const [body, limit] of [
      [{ name, cpuCount: 100000, memoryMB: 99999999 }, '--max-cpu-count'],
      [{ name, cpuCount: MAX_CPUS + 1 }, '--max-cpu-count'],
      [{ name, memoryMB: MAX_MEMORY_MB + 1 }, '--max-memory-mb'],
    ]) {
      const res = await api(keyA, 'POST', '/v3/templates', body)
      const got = await res.json()
      assert.equal(res.status, 400, JSON.stringify(got))
      assert.equal(got.code, 400)
      assert.ok(got.message.includes(limit), `message ${got.message} does not name ${limit}`)
    }
    await assert.rejects(
      Template.build(Template().fromImage('warren/base').runCmd('true'), name, { apiKey: keyB, cpuCount: 100000, memoryMB: 99999999 }),
      /--max-cpu-count/,
    )
    const res = await api(keyA, 'GET', `/templates/${name}`)
    assert.equal(res.status, 404, 'a refused template was made')
  })
})
