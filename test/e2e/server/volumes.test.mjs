// Volumes' control plane against a real `warren serve` through the official SDK (Volume exists
// from 2.3x, so this runs with 2.51): create, list, getInfo (with a token, no domain), connect,
// destroy; duplicate and bad names; another team (a key made with `warren keys create --team`)
// sees none of them: 404 on getInfo, false on destroy, an empty list. The content API (text, binary,
// a 100 MB stream, tokens), volumeMounts in two sandboxes at once, across pause/resume, kill and a
// kill -9 of the server. The server runs with --volume-size-mb, so each volume is its own
// loop-mounted filesystem: a sandbox's write past the limit fails with ENOSPC, the content API's
// with 413. Under gVisor (test.sh's gvisor_suite) a checkpoint of a sandbox with a volume
// mounted; where engine restarts are allowed (CI, see helpers.mjs), one with volumes mounted in a
// running and a paused sandbox. On the Kubernetes engine (test/e2e/kube-run.sh) each volume is a
// PersistentVolumeClaim of the test cluster's local-path provisioner's class that enforces a size
// (warren-local-path-sized: a loop-mounted filesystem per volume, ReadWriteOnce), so the size tests
// run there too; its sandboxes are asserted on the node that holds it, and restarts of the node
// agent and of the provisioner keep its content reachable.
import { it, describe } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Sandbox, Volume, VolumeError, VolumeNotFoundError, VolumePathNotFoundError } from 'e2b'
import { useServer, WARREN_BIN } from './harness.mjs'
import { assert, uid, waitFor, dockerd, restartDockerd, kubectl, volumeFigures } from './helpers.mjs'

const kube = process.env.WARREN_ENGINE === 'kubernetes'
/** The node a sandbox's pod runs on (Kubernetes). */
const nodeOf = async (sandboxId) => (await kubectl('get', 'pod', `warren-${sandboxId}`, '-o', 'jsonpath={.spec.nodeName}')).trim()
/** The node that holds a volume's PersistentVolume (its node affinity). */
async function volumeNode(volumeId) {
  const pv = (await kubectl('get', 'pvc', `warren-${volumeId}`, '-o', 'jsonpath={.spec.volumeName}')).trim()
  return (await kubectl('get', 'pv', pv, '-o', 'jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}')).trim()
}

const limitMB = 128
const srv = await useServer({ private: true, args: ['--volume-size-mb', String(limitMB), '--reconcile-interval', '2s'] })
// before() of useServer has set E2B_API_URL; the content calls go to the same server.
const contentEnv = () => { process.env.E2B_VOLUME_API_URL = process.env.E2B_API_URL }

async function otherTeam() {
  const { stdout } = await promisify(execFile)(WARREN_BIN, ['keys', 'create', '--team', `other-${uid()}`, ...srv.server.storeFlags])
  return stdout.trim()
}

describe('volumes', () => {
  it('create, list, getInfo, connect, destroy', async () => {
    const name = `vol-${uid()}`
    const vol = await Volume.create(name)
    assert.equal(vol.name, name)
    assert.ok(vol.volumeId && vol.token, 'an ID and a token')

    const listed = await Volume.list()
    assert.ok(listed.some((v) => v.volumeId === vol.volumeId && v.name === name), 'listed')
    const info = await Volume.getInfo(vol.volumeId)
    assert.equal(info.name, name)
    assert.ok(info.token)
    assert.equal(info.domain, undefined, 'no domain: the SDK uses E2B_VOLUME_API_URL')
    const again = await Volume.connect(vol.volumeId)
    assert.equal(again.name, name)

    assert.equal(await Volume.destroy(vol.volumeId), true)
    assert.equal(await Volume.destroy(vol.volumeId), false, 'a second destroy finds nothing')
    await assert.rejects(Volume.getInfo(vol.volumeId), VolumeNotFoundError)
    assert.ok(!(await Volume.list()).some((v) => v.volumeId === vol.volumeId))
  })

  it('refuses a duplicate or bad name', async () => {
    const name = `dup-${uid()}`
    const vol = await Volume.create(name)
    try {
      await assert.rejects(Volume.create(name), (e) => e instanceof VolumeError && /already exists/.test(e.message))
      for (const bad of ['', 'a/b', 'has space', '../x']) {
        await assert.rejects(Volume.create(bad), (e) => e instanceof VolumeError && /invalid volume name/.test(e.message), `name ${JSON.stringify(bad)}`)
      }
    } finally {
      await Volume.destroy(vol.volumeId)
    }
  })

  it("another team's key sees no volume of this team", async () => {
    const vol = await Volume.create(`mine-${uid()}`)
    try {
      const apiKey = await otherTeam()
      await assert.rejects(Volume.getInfo(vol.volumeId, { apiKey }), VolumeNotFoundError)
      assert.equal(await Volume.destroy(vol.volumeId, { apiKey }), false)
      assert.deepEqual(await Volume.list({ apiKey }), [])
      const theirs = await Volume.create(vol.name, { apiKey })
      assert.notEqual(theirs.volumeId, vol.volumeId, 'a name is per team')
      assert.equal((await Volume.getInfo(vol.volumeId)).name, vol.name, 'still there for its own team')
    } finally {
      await Volume.destroy(vol.volumeId)
    }
  })

  it('content: text, binary and a 100 MB stream round trip; list, makeDir, stat, metadata, remove', async () => {
    contentEnv()
    const vol = await Volume.create(`content-${uid()}`)
    try {
      const w = await vol.writeFile('/docs/hello.txt', 'hello volume')
      assert.equal(w.path, '/docs/hello.txt')
      assert.equal(w.type, 'file')
      assert.equal(await vol.readFile('/docs/hello.txt'), 'hello volume')
      const bin = new Uint8Array(256).map((_, i) => i)
      await vol.writeFile('/bin.dat', bin.buffer)
      assert.deepEqual(await vol.readFile('/bin.dat', { format: 'bytes' }), bin)
      const blob = await vol.readFile('/bin.dat', { format: 'blob' })
      assert.equal(blob.size, 256)

      const size = 100 * 1024 * 1024
      const chunk = new Uint8Array(1024 * 1024).map((_, i) => (i * 7) & 255)
      let sent = 0
      const up = new ReadableStream({
        pull(c) { if (sent >= size) return c.close(); c.enqueue(chunk); sent += chunk.length },
      })
      const big = await vol.writeFile('/big.bin', up)
      assert.equal(big.size, size)
      const down = await vol.readFile('/big.bin', { format: 'stream' })
      let got = 0, same = true
      for await (const part of down) {
        for (let i = 0; i < part.length; i += 4099) if (part[i] !== chunk[(got + i) % chunk.length]) same = false
        got += part.length
      }
      assert.equal(got, size)
      assert.ok(same, 'the stream reads back what was written')

      const dir = await vol.makeDir('/a/b/c', { force: true })
      assert.equal(dir.type, 'directory')
      await assert.rejects(vol.makeDir('/x/y'), VolumePathNotFoundError, 'no parents without force')
      const names = (await vol.list('/', { depth: 3 })).map((e) => e.path).sort()
      assert.ok(names.includes('/a/b/c') && names.includes('/docs/hello.txt'), names.join(' '))
      assert.ok((await vol.getInfo('/docs')).mtime instanceof Date)
      assert.equal(await vol.exists('/docs/hello.txt'), true)
      assert.equal(await vol.exists('/nope'), false)
      const md = await vol.updateMetadata('/docs/hello.txt', { mode: 0o600 })
      assert.equal(md.mode, 0o600)
      await vol.remove('/docs')
      await assert.rejects(vol.readFile('/docs/hello.txt'), VolumePathNotFoundError)
      await assert.rejects(vol.getInfo('/../../etc/passwd'), VolumePathNotFoundError, '.. stays in the volume')
    } finally {
      await Volume.destroy(vol.volumeId)
    }
  })

  it('content: a wrong or deleted volume token is refused', async () => {
    contentEnv()
    const a = await Volume.create(`tok-a-${uid()}`)
    const b = await Volume.create(`tok-b-${uid()}`)
    await a.writeFile('/f', 'a')
    const wrong = new Volume(a.volumeId, a.name, b.token)
    await assert.rejects(wrong.readFile('/f'), (e) => e instanceof VolumeError && !(e instanceof VolumePathNotFoundError))
    const res = await fetch(`${process.env.E2B_API_URL}/volumecontent/${a.volumeId}/file?path=/f`, { headers: { Authorization: `Bearer ${b.token}` } })
    assert.equal(res.status, 403)
    const none = await fetch(`${process.env.E2B_API_URL}/volumecontent/${a.volumeId}/file?path=/f`)
    assert.equal(none.status, 401)
    await Volume.destroy(a.volumeId)
    await assert.rejects(a.readFile('/f'), VolumeError, 'a deleted volume\'s token is dead')
    await Volume.destroy(b.volumeId)
  })

  it('mounts: one volume in two sandboxes at once, each seeing the other\'s writes; kept across pause/resume and kill', async () => {
    contentEnv()
    const vol = await Volume.create(`mnt-${uid()}`)
    const made = []
    try {
      const a = await Sandbox.create('base', { volumeMounts: { '/mnt/ws': vol }, timeoutMs: 120_000 })
      made.push(a)
      const b = await Sandbox.create('base', { volumeMounts: { '/data': vol.name }, timeoutMs: 120_000 })
      made.push(b)
      assert.deepEqual((await a.getInfo()).volumeMounts, [{ name: vol.name, path: '/mnt/ws' }])
      if (kube) {
        // ReadWriteOnce: both on the node that holds the volume, whichever the scheduler liked.
        const at = await volumeNode(vol.volumeId)
        assert.ok(at, 'the volume is on a node')
        assert.deepEqual([await nodeOf(a.sandboxId), await nodeOf(b.sandboxId)], [at, at], 'ReadWriteOnce: its sandboxes run on its node')
      }
      const listed = (await Sandbox.list().nextItems()).find((s) => s.sandboxId === b.sandboxId)
      assert.deepEqual(listed.volumeMounts, [{ name: vol.name, path: '/data' }])

      await a.commands.run('echo from-a > /mnt/ws/a.txt')
      assert.equal((await b.commands.run('cat /data/a.txt')).stdout.trim(), 'from-a', 'b sees a\'s write')
      await b.files.write('/data/b.txt', 'from-b')
      assert.equal((await a.commands.run('cat /mnt/ws/b.txt')).stdout.trim(), 'from-b', 'a sees b\'s write')
      assert.equal(await vol.readFile('/b.txt'), 'from-b', 'the content API sees a sandbox\'s write')
      await vol.writeFile('/c.txt', 'from-api')
      assert.equal((await a.commands.run('cat /mnt/ws/c.txt')).stdout.trim(), 'from-api')
      await a.commands.run('echo changed > /mnt/ws/c.txt')
      assert.equal(await vol.readFile('/c.txt'), 'changed\n', "the sandbox's user rewrites what the content API wrote")

      await assert.rejects(Volume.destroy(vol.volumeId), /mounted by sandbox/, 'a mounted volume is not deleted')

      await a.pause()
      const a2 = await Sandbox.connect(a.sandboxId)
      assert.equal((await a2.commands.run('cat /mnt/ws/b.txt')).stdout.trim(), 'from-b', 'after pause/resume')
      await a2.commands.run('echo again > /mnt/ws/after-resume.txt')

      await Sandbox.kill(a.sandboxId)
      await Sandbox.kill(b.sandboxId)
      assert.equal(await vol.readFile('/after-resume.txt'), 'again\n', 'the data outlives the sandboxes')
      const c = await Sandbox.create('base', { volumeMounts: { '/w': vol }, timeoutMs: 60_000 })
      made.push(c)
      assert.equal((await c.commands.run('cat /w/a.txt')).stdout.trim(), 'from-a', 'a new sandbox mounts the kept data')
      await Sandbox.kill(c.sandboxId)
    } finally {
      for (const s of made) await Sandbox.kill(s.sandboxId).catch(() => {})
      await Volume.destroy(vol.volumeId).catch(() => {})
    }
  })

  it('size limit: a sandbox writing past it gets ENOSPC, the content API 413; freeing space lets both write', {
    skip: kube && !process.env.WARREN_VOLUME_STORAGE_CLASS && 'the cluster\'s default class does not enforce a size: kube-run.sh runs this on warren-local-path-sized (docs/volumes.md)',
  }, async () => {
    contentEnv()
    const vol = await Volume.create(`quota-${uid()}`)
    const sbx = await Sandbox.create('base', { volumeMounts: { '/mnt/q': vol }, timeoutMs: 120_000 })
    try {
      const r = await sbx.commands.run(`dd if=/dev/zero of=/mnt/q/fill bs=1M count=${2 * limitMB} 2>&1; echo rc=$?`)
      assert.match(r.stdout, /No space left on device/, r.stdout)
      assert.doesNotMatch(r.stdout, /rc=0/)
      const df = await sbx.commands.run('df -B1M --output=size /mnt/q | tail -1')
      const sizeMB = Number(df.stdout.trim())
      assert.ok(sizeMB >= limitMB && sizeMB < limitMB * 1.2, `the mount's size is the limit: ${sizeMB} MiB`)
      const filled = await sbx.commands.run('stat -c %s /mnt/q/fill')
      assert.ok(Number(filled.stdout) >= limitMB * 1024 * 1024, `at least the limit fits: ${filled.stdout}`)
      await assert.rejects(vol.writeFile('/more.bin', new Uint8Array(1024 * 1024)),
        (e) => e instanceof VolumeError && /size limit/.test(e.message))
      assert.equal(await vol.exists('/more.bin'), false, 'a refused write leaves nothing')
      await sbx.commands.run('rm /mnt/q/fill')
      await vol.writeFile('/more.bin', new Uint8Array(1024 * 1024))
      await sbx.commands.run('head -c 1048576 /dev/zero > /mnt/q/again')
    } finally {
      await Sandbox.kill(sbx.sandboxId).catch(() => {})
      await Volume.destroy(vol.volumeId).catch(() => {})
    }
  })

  it('gVisor checkpoint with a volume mounted: memory and processes come back, the volume is not in the checkpoint', {
    skip: process.env.WARREN_RUNTIME !== 'gvisor' && 'checkpoints are gVisor\'s (test.sh gvisor_suite runs this)', timeout: 180_000,
  }, async () => {
    contentEnv()
    const vol = await Volume.create(`ckpt-${uid()}`)
    const sbx = await Sandbox.create('base', { volumeMounts: { '/mnt/c': vol }, timeoutMs: 120_000 })
    try {
      await sbx.commands.run('echo before > /mnt/c/before.txt')
      // A value only in a process's memory, and a file on the volume the process keeps open.
      await sbx.commands.run(`nohup sh -c 'v=$(cat /proc/sys/kernel/random/uuid); exec 3>>/mnt/c/log; while true; do echo $v > /tmp/mem.new; mv /tmp/mem.new /tmp/mem; echo $v >&3; sleep 0.2; done' >/dev/null 2>&1 &
sleep 0.5`)
      const value = (await sbx.commands.run('cat /tmp/mem')).stdout.trim()
      const res = await srv.server.api(`/sandboxes/${sbx.sandboxId}/stop`, { method: 'POST' })
      assert.ok(res.ok, `stop (checkpoint): ${res.status} ${await res.text()}`)
      await vol.writeFile('/during.txt', 'written while checkpointed')
      const logged = (await vol.readFile('/log')).length

      const back = await Sandbox.connect(sbx.sandboxId)
      assert.equal((await back.commands.run('sleep 0.5; pgrep -f mem.new >/dev/null && cat /tmp/mem')).stdout.trim(), value,
        'the process came back with the value in its memory')
      assert.equal((await back.commands.run('cat /mnt/c/during.txt')).stdout, 'written while checkpointed',
        'the restored sandbox sees what was written to the volume meanwhile: the volume is not in the checkpoint')
      assert.equal((await back.commands.run('cat /mnt/c/before.txt')).stdout, 'before\n')
      await waitFor(async () => (await vol.readFile('/log')).length > logged, { timeoutMs: 10_000, what: 'the restored process to write to its open volume file' })
      await back.commands.run('echo after > /mnt/c/after.txt')
      assert.equal(await vol.readFile('/after.txt'), 'after\n')
    } finally {
      await Sandbox.kill(sbx.sandboxId).catch(() => {})
      await Volume.destroy(vol.volumeId).catch(() => {})
    }
  })

  it('engine restart: running and paused sandboxes come back with their volumes mounted (WARREN_E2E_RESTART_DOCKERD=1 only)', {
    skip: (kube && 'no Docker engine runs the sandboxes') || (!dockerd && 'set WARREN_E2E_RESTART_DOCKERD=1 (CI does)'), timeout: 300_000,
  }, async () => {
    contentEnv()
    const vol = await Volume.create(`engine-${uid()}`)
    const made = []
    try {
      const a = await Sandbox.create('base', { volumeMounts: { '/mnt/e': vol }, timeoutMs: 600_000 })
      made.push(a)
      const b = await Sandbox.create('base', { volumeMounts: { '/mnt/e': vol }, timeoutMs: 600_000 })
      made.push(b)
      await a.commands.run('echo from-a > /mnt/e/a.txt')
      await b.commands.run('echo from-b > /mnt/e/b.txt')
      assert.equal(await b.pause(), true)

      await restartDockerd()

      assert.equal(await vol.readFile('/a.txt'), 'from-a\n', 'the content API reads the volume after the restart')
      for (const [sbx, mine] of [[a, 'a'], [b, 'b']]) {
        const again = await waitFor(async () => {
          const s = await Sandbox.connect(sbx.sandboxId)
          return (await s.commands.run('cat /mnt/e/a.txt /mnt/e/b.txt')).stdout === 'from-a\nfrom-b\n' ? s : undefined
        }, { timeoutMs: 90_000, intervalMs: 1_000, what: `sandbox ${sbx.sandboxId} to be back with its volume` })
        await again.commands.run(`echo after > /mnt/e/after-${mine}.txt`)
        assert.equal(await vol.readFile(`/after-${mine}.txt`), 'after\n', 'a write after the restart lands in the volume')
      }
      const df = await a.commands.run('df -B1M --output=size /mnt/e | tail -1')
      assert.ok(Number(df.stdout.trim()) < limitMB * 1.2, `still the volume's own filesystem: ${df.stdout}`)
    } finally {
      for (const s of made) await Sandbox.kill(s.sandboxId).catch(() => {})
      await Volume.destroy(vol.volumeId).catch(() => {})
    }
  })

  it('mounts: an unknown or another team\'s volume and bad paths are refused', async () => {
    const vol = await Volume.create(`bad-${uid()}`)
    try {
      await assert.rejects(Sandbox.create('base', { volumeMounts: { '/mnt/x': 'no-such-volume' } }), /volume 'no-such-volume' not found/)
      const apiKey = await otherTeam()
      await assert.rejects(Sandbox.create('base', { apiKey, volumeMounts: { '/mnt/x': vol.name } }), /not found/)
      for (const p of ['relative', '/', '/proc', '/dev/shm', '/sys/x']) {
        await assert.rejects(Sandbox.create('base', { volumeMounts: { [p]: vol } }), /volume|mount/, `path ${p}`)
      }
    } finally {
      await Volume.destroy(vol.volumeId)
    }
  })

  it('kill -9 of the server: the volume, its content, its token and a sandbox\'s mount are kept', async () => {
    contentEnv()
    const vol = await Volume.create(`k9-${uid()}`)
    const sbx = await Sandbox.create('base', { volumeMounts: { '/mnt/k': vol }, timeoutMs: 120_000 })
    try {
      await sbx.commands.run('echo before > /mnt/k/f.txt')
      await srv.server.kill9()
      await srv.server.start()
      Object.assign(process.env, srv.server.sdkEnv)
      contentEnv()
      assert.equal(await vol.readFile('/f.txt'), 'before\n', 'the old token still reads')
      assert.deepEqual((await Sandbox.getInfo(sbx.sandboxId)).volumeMounts, [{ name: vol.name, path: '/mnt/k' }])
      const again = await Sandbox.connect(sbx.sandboxId)
      await again.commands.run('echo after > /mnt/k/g.txt')
      assert.equal(await vol.readFile('/g.txt'), 'after\n')
    } finally {
      await Sandbox.kill(sbx.sandboxId).catch(() => {})
      await Volume.destroy(vol.volumeId).catch(() => {})
    }
  })

  it('Kubernetes: a claim of the volume\'s size, gone with it; content through a node agent restart and a stopped pause; create → first command and content MiB/s', {
    skip: !kube && 'the Kubernetes engine\'s (kube-run.sh)', timeout: 300_000,
  }, async () => {
    contentEnv()
    const vol = await Volume.create(`kube-${uid()}`)
    const made = []
    try {
      const size = (await kubectl('get', 'pvc', `warren-${vol.volumeId}`, '-o', 'jsonpath={.spec.resources.requests.storage}')).trim()
      assert.equal(size, `${limitMB}Mi`, 'the claim requests --volume-size-mb')
      await vol.writeFile('/kept.txt', 'kept')

      // Its node's agent restarted: the content is where it was, and served again.
      const node = await volumeNode(vol.volumeId)
      await kubectl('delete', 'pod', '-l', 'app.kubernetes.io/name=warren-node', '--field-selector', `spec.nodeName=${node}`, '--wait=true')
      await waitFor(async () => (await vol.readFile('/kept.txt').catch(() => '')) === 'kept',
        { timeoutMs: 60_000, intervalMs: 500, what: 'the content API through the new node agent' })
      // Its node's provisioner restarted: the volume's filesystem stays mounted on the node (a
      // pod's mounts do not go with it), its content where it was.
      await kubectl('-n', 'warren-local-path', 'delete', 'pod', '-l', 'app.kubernetes.io/name=warren-local-path', '--field-selector', `spec.nodeName=${node}`, '--wait=true')
      await kubectl('-n', 'warren-local-path', 'rollout', 'status', 'daemonset/warren-local-path', '--timeout=90s')
      assert.equal(await vol.readFile('/kept.txt'), 'kept', 'the content after a provisioner restart')

      // A pause without memory deletes the pod; the resume makes it again with the claim.
      const st = await Sandbox.create('base', { volumeMounts: { '/s': vol }, timeoutMs: 60_000 })
      made.push(st)
      await st.commands.run('echo before-stop > /s/stop.txt')
      assert.equal(await st.pause({ keepMemory: false }), true)
      await vol.writeFile('/while-stopped.txt', 'meanwhile')
      const back = await Sandbox.connect(st.sandboxId)
      assert.equal((await back.commands.run('cat /s/stop.txt /s/while-stopped.txt')).stdout, 'before-stop\nmeanwhile')
      assert.equal(await nodeOf(st.sandboxId), node, 'resumed on the volume\'s node')
      await Sandbox.kill(st.sandboxId)

      const { ms, write: wr, read: rd } = await volumeFigures(vol, async () => {
        const sbx = await Sandbox.create('base', { volumeMounts: { '/v': vol }, timeoutMs: 60_000 })
        made.push(sbx)
        assert.equal((await sbx.commands.run('cat /v/kept.txt')).stdout, 'kept')
        return sbx
      })
      console.log(`# volumes on Kubernetes: create → first command with a volume p50 ${ms[2].toFixed(0)} ms (min ${ms[0].toFixed(0)}, max ${ms[4].toFixed(0)}, n=5); content API write ${wr.toFixed(1)} MiB/s, read ${rd.toFixed(1)} MiB/s (64 MiB)`)

      const pv = (await kubectl('get', 'pvc', `warren-${vol.volumeId}`, '-o', 'jsonpath={.spec.volumeName}')).trim()
      assert.equal(await Volume.destroy(vol.volumeId), true)
      await waitFor(async () => !(await kubectl('get', 'pvc,pv', '-o', 'name')).includes(pv) && !(await kubectl('get', 'pvc', '-o', 'name')).includes(vol.volumeId),
        { timeoutMs: 60_000, intervalMs: 500, what: 'the claim and its volume to go with the volume' })
    } finally {
      for (const s of made) await Sandbox.kill(s.sandboxId).catch(() => {})
      await Volume.destroy(vol.volumeId).catch(() => {})
    }
  })
})
