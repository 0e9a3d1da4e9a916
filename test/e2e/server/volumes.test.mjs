// Volumes' control plane against a real `warren serve` through the official SDK (Volume exists
// from 2.3x, so this runs with 2.51): create, list, getInfo (with a token, no domain), connect,
// destroy; duplicate and bad names; another team (a key made with `warren keys create --team`)
// sees none of them: 404 on getInfo, false on destroy, an empty list.
import { it, describe } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Volume, VolumeError, VolumeNotFoundError } from 'e2b'
import { useServer, WARREN_BIN } from './harness.mjs'
import { assert, uid } from './helpers.mjs'

const srv = await useServer({ private: true })

async function otherTeam() {
  const { stdout } = await promisify(execFile)(WARREN_BIN, ['keys', 'create', '--team', `other-${uid()}`, '--state-dir', srv.server.stateDir])
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
})
