// ReadWriteMany volumes on the Kubernetes engine, against the real two-node cluster: the server
// runs with --volume-storage-class warren-shared --volume-access-mode ReadWriteMany, so a volume
// is a directory of MooseFS (scripts/kube.sh shared), which a DaemonSet mounts with FUSE on
// every node. Two sandboxes on different nodes mount one volume at once: a write in one is read
// in the other, and in the content API (served by a node agent from its node's mount); a file
// the content API writes is read in both; the data outlives a sandbox's kill and is there for a
// new sandbox; no sandbox reaches MooseFS's servers. Prints create → first command with a
// shared volume (p50, n=5) and the content API's write and read MiB/s (64 MiB) on it.
//
// Runs only under kube-run.sh (WARREN_ENGINE=kubernetes), which installs MooseFS first.
import { it, before, describe } from 'node:test'
import { Sandbox, Volume } from 'e2b'
import { useServer } from '../server/harness.mjs'
import { assert, waitFor, uid, kubectl, volumeFigures } from '../server/helpers.mjs'

const srv = await useServer({ private: true, args: ['--volume-storage-class', 'warren-shared', '--volume-access-mode', 'ReadWriteMany'] })

/** The node a sandbox's pod runs on. */
const nodeOf = async (sandboxId) => (await kubectl('get', 'pod', `warren-${sandboxId}`, '-o', 'jsonpath={.spec.nodeName}')).trim()

before(() => assert.equal(process.env.WARREN_ENGINE, 'kubernetes', 'run this file through test/e2e/kube-run.sh'))

describe('ReadWriteMany volumes', () => {
  it('two sandboxes on different nodes share a volume; it outlives a kill; create → first command and content MiB/s', { timeout: 300_000 }, async () => {
    process.env.E2B_VOLUME_API_URL = srv.url // the content calls go to this file's server
    const vol = await Volume.create(`shared-${uid()}`)
    const made = []
    const create = async () => {
      const sbx = await Sandbox.create('base', { volumeMounts: { '/shared': vol }, timeoutMs: 120_000 })
      made.push(sbx)
      return sbx
    }
    try {
      const claim = JSON.parse(await kubectl('get', 'pvc', `warren-${vol.volumeId}`, '-o', 'json'))
      assert.deepEqual(claim.spec.accessModes, ['ReadWriteMany'])
      assert.equal(claim.spec.storageClassName, 'warren-shared')
      await vol.writeFile('/from-api.txt', 'api')

      // The scheduler spreads a volume's sandboxes (nothing pins them): create until one runs on
      // another node than the first, at most 6.
      const a = await create()
      const nodeA = await nodeOf(a.sandboxId)
      let b
      for (let i = 0; i < 6 && !b; i++) {
        const s = await create()
        if ((await nodeOf(s.sandboxId)) !== nodeA) b = s
      }
      assert.ok(b, `no sandbox of the volume ran on another node than ${nodeA} in 6 creates`)
      const nodeB = await nodeOf(b.sandboxId)

      // Each sees the content API's file, and the other's writes (a FUSE mount on each node: the
      // other node's mount learns of a new file from the master within moments).
      for (const s of [a, b]) assert.equal((await s.commands.run('cat /shared/from-api.txt')).stdout, 'api')
      await a.commands.run(`echo "from ${nodeA}" > /shared/a.txt`)
      await waitFor(async () => (await b.commands.run('cat /shared/a.txt').catch(() => ({ stdout: '' }))).stdout === `from ${nodeA}\n`,
        { timeoutMs: 15_000, intervalMs: 200, what: `a's write on ${nodeA} in b on ${nodeB}` })
      await b.commands.run(`echo "from ${nodeB}" >> /shared/a.txt && dd if=/dev/urandom of=/shared/b.bin bs=1M count=8 status=none`)
      const sumB = (await b.commands.run('sha256sum < /shared/b.bin')).stdout
      await waitFor(async () => (await a.commands.run('cat /shared/a.txt').catch(() => ({ stdout: '' }))).stdout === `from ${nodeA}\nfrom ${nodeB}\n`,
        { timeoutMs: 15_000, intervalMs: 200, what: `b's append on ${nodeB} in a on ${nodeA}` })
      assert.equal((await a.commands.run('sha256sum < /shared/b.bin')).stdout, sumB, "b's 8 MiB read whole in a")
      assert.equal(await vol.readFile('/a.txt'), `from ${nodeA}\nfrom ${nodeB}\n`, 'the content API reads what the sandboxes wrote')

      // MooseFS's chunk server takes no credentials: no sandbox may reach its servers, by the
      // Service or the pod (the master's ports for clients, chunk servers and metaloggers, the
      // chunk server's).
      const svc = (await kubectl('-n', 'warren-moosefs', 'get', 'service', 'moosefs', '-o', 'jsonpath={.spec.clusterIP}')).trim()
      const pod = (await kubectl('-n', 'warren-moosefs', 'get', 'pods', '-l', 'app.kubernetes.io/name=moosefs', '-o', 'jsonpath={.items[0].status.podIP}')).trim()
      for (const target of [`${svc}/9421`, `${pod}/9419`, `${pod}/9420`, `${pod}/9421`, `${pod}/9422`]) {
        const r = await a.commands.run(`timeout 3 bash -c '</dev/tcp/${target}'; echo $?`)
        assert.equal(r.stdout.trim(), '1', `a sandbox's connection to MooseFS at ${target}: want refused at once (1), got ${r.stdout.trim()} (0 open, 124 hung)`)
      }

      // Killed, the sandboxes leave the data: a new sandbox and the content API see it.
      for (const s of [...made]) await Sandbox.kill(s.sandboxId)
      const c = await create()
      assert.equal((await c.commands.run('cat /shared/a.txt')).stdout, `from ${nodeA}\nfrom ${nodeB}\n`)
      assert.equal((await c.commands.run('sha256sum < /shared/b.bin')).stdout, sumB)
      await Sandbox.kill(c.sandboxId)

      const nodes = new Set()
      const { ms, write: wr, read: rd } = await volumeFigures(vol, async () => {
        const s = await create()
        assert.equal((await s.commands.run('cat /shared/from-api.txt')).stdout, 'api')
        nodes.add(await nodeOf(s.sandboxId))
        return s
      })
      console.log(`# ReadWriteMany volumes (MooseFS) on Kubernetes: create → first command with a volume p50 ${ms[2].toFixed(0)} ms (min ${ms[0].toFixed(0)}, max ${ms[4].toFixed(0)}, n=5, on ${[...nodes].join(' ')}); content API write ${wr.toFixed(1)} MiB/s, read ${rd.toFixed(1)} MiB/s (64 MiB)`)

      const pv = claim.spec.volumeName || (await kubectl('get', 'pvc', `warren-${vol.volumeId}`, '-o', 'jsonpath={.spec.volumeName}')).trim()
      assert.equal(await Volume.destroy(vol.volumeId), true)
      await waitFor(async () => !(await kubectl('get', 'pv', '-o', 'name')).includes(pv),
        { timeoutMs: 60_000, intervalMs: 500, what: 'the volume\'s PersistentVolume to go with it' })
      const left = await kubectl('-n', 'warren-moosefs', 'exec', 'daemonset/moosefs-mount', '--', 'ls', '/volumes/_shared')
      assert.ok(!left.split('\n').includes(pv), `its directory ${pv} is gone from MooseFS`)
    } finally {
      for (const s of made) await Sandbox.kill(s.sandboxId).catch(() => {})
      await Volume.destroy(vol.volumeId).catch(() => {})
    }
  })
})
