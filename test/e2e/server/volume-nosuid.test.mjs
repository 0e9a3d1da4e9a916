// A volume is no way onto the host for setuid programs: sandbox root is host root (no user
// namespace), so a setuid-root shell made in a volume would give a root shell to any local user
// who can reach its directory. On a server with plain-directory volumes (no --volume-size-mb;
// volumes.test.mjs covers the loop-mounted ones), the volume's host directory is a nosuid,nodev
// mount behind a 0700 volumes directory, as the host sees it (findmnt, stat). Under runc the
// setuid bit does nothing in the sandbox either (the bind mount keeps the host mount's nosuid):
// `user` running it stays `user`. Under gVisor the sandbox's own kernel runs setuid programs
// (runsc --allow-suid, so that sudo works there) whatever the host mount says: root in the
// sandbox is no one on the host, and `user` has sudo in the sandbox anyway.
import { it, describe } from 'node:test'
import { execFile } from 'node:child_process'
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Sandbox, Volume } from 'e2b'
import { useServer } from './harness.mjs'
import { assert, uid } from './helpers.mjs'

const srv = await useServer({ private: true })
const run = promisify(execFile)

describe('volumes and setuid', { timeout: 120_000 }, () => {
  it('a setuid-root shell made in a volume is not one on the host, nor in the sandbox under runc', async () => {
    process.env.E2B_VOLUME_API_URL = process.env.E2B_API_URL
    const vol = await Volume.create(`suid-${uid()}`)
    const sbx = await Sandbox.create('base', { volumeMounts: { '/mnt/v': vol }, timeoutMs: 60_000 })
    try {
      await sbx.commands.run('cp /bin/bash /mnt/v/suid && chmod 4755 /mnt/v/suid', { user: 'root' })
      if (process.env.WARREN_RUNTIME !== 'gvisor') {
        const inside = await sbx.commands.run('/mnt/v/suid -p -c "id -u"')
        assert.equal(inside.stdout.trim(), '1000', 'the setuid bit took effect in the sandbox')
      }

      const volumes = join(srv.server.stateDir, 'volumes')
      assert.equal((await stat(volumes)).mode & 0o777, 0o700, 'the volumes directory is not 0700')
      const file = join(volumes, vol.volumeId, 'suid')
      assert.equal((await stat(file)).mode & 0o7777, 0o4755, 'the file the sandbox made')
      const { stdout } = await run('findmnt', ['-no', 'OPTIONS', '-T', file])
      const opts = stdout.trim().split(',')
      assert.ok(opts.includes('nosuid') && opts.includes('nodev'), `the host mounts the volume ${stdout.trim()}`)
    } finally {
      await sbx.kill()
      await Volume.destroy(vol.volumeId)
    }
  })
})
