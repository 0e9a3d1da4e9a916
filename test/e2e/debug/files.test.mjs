// sandbox.files: read, write, list, exists, getInfo, makeDir, remove, rename, metadata, gzip.
import { it } from 'node:test'
import {
  assert,
  describeEachSdk,
  rejectsWith,
  uid,
  defined,
  readAll,
  streamOf,
  allBytes,
  sdkMinor,
} from './helpers.mjs'

const T = { timeout: 60_000 }

describeEachSdk('files', (ctx) => {
  const p = (name) => `${ctx.dir}/${name}`
  const hasMetadata = () => sdkMinor(ctx.version) >= 45 // metadata on writes: newer SDKs only

  // ---------------------------------------------------------------- write + read
  it('write returns the written file and read returns its text', T, async () => {
    const info = await ctx.sbx.files.write(`${ctx.rel}/hello.txt`, 'Hello, world!')
    assert.deepStrictEqual(defined({ ...info }), { name: 'hello.txt', path: p('hello.txt'), type: 'file' })
    assert.equal(await ctx.sbx.files.read(p('hello.txt')), 'Hello, world!')
    assert.equal(await ctx.sbx.files.read(`${ctx.rel}/hello.txt`), 'Hello, world!')
    assert.equal(await ctx.sbx.files.read(`~/${ctx.rel}/hello.txt`), 'Hello, world!')
  })

  it('read returns bytes, blob and stream formats exactly', T, async () => {
    const data = allBytes(4)
    await ctx.sbx.files.write(p('bin.dat'), data.buffer.slice(data.byteOffset, data.byteOffset + data.length))
    const bytes = await ctx.sbx.files.read(p('bin.dat'), { format: 'bytes' })
    assert.ok(bytes instanceof Uint8Array)
    assert.deepStrictEqual(Buffer.from(bytes), data)
    const blob = await ctx.sbx.files.read(p('bin.dat'), { format: 'blob' })
    assert.ok(blob instanceof Blob)
    assert.deepStrictEqual(Buffer.from(await blob.arrayBuffer()), data)
    const stream = await ctx.sbx.files.read(p('bin.dat'), { format: 'stream' })
    assert.deepStrictEqual(await readAll(stream), data)
  })

  it('an empty file reads as empty in every format', T, async () => {
    await ctx.sbx.files.write(p('empty.txt'), '')
    assert.equal(await ctx.sbx.files.read(p('empty.txt')), '')
    assert.equal((await ctx.sbx.files.read(p('empty.txt'), { format: 'bytes' })).length, 0)
    assert.equal((await ctx.sbx.files.read(p('empty.txt'), { format: 'blob' })).size, 0)
    assert.equal((await readAll(await ctx.sbx.files.read(p('empty.txt'), { format: 'stream' }))).length, 0)
    assert.equal((await ctx.sbx.files.getInfo(p('empty.txt'))).size, 0)
  })

  it('a UTF-8 text round-trips and the file on disk has the same bytes', T, async () => {
    const text = 'ünïcødé ✓ 世界 🚀\nline 2\n'
    await ctx.sbx.files.write(p('utf8.txt'), text)
    assert.equal(await ctx.sbx.files.read(p('utf8.txt')), text)
    const r = await ctx.sbx.commands.run(`sha256sum < ${p('utf8.txt')}`)
    const { createHash } = await import('node:crypto')
    assert.equal(r.stdout.split(' ')[0], createHash('sha256').update(text).digest('hex'))
  })

  it('a file written by a command reads back', T, async () => {
    await ctx.sbx.commands.run(`printf 'from\\ncommand' > ${p('cmd.txt')}`)
    assert.equal(await ctx.sbx.files.read(p('cmd.txt')), 'from\ncommand')
  })

  it('write overwrites and truncates an existing file', T, async () => {
    await ctx.sbx.files.write(p('over.txt'), 'a much longer first version')
    await ctx.sbx.files.write(p('over.txt'), 'short')
    assert.equal(await ctx.sbx.files.read(p('over.txt')), 'short')
  })

  it('write creates missing parent directories owned by user', T, async () => {
    const info = await ctx.sbx.files.write(p('new/deep/er/file.txt'), 'x')
    assert.equal(info.path, p('new/deep/er/file.txt'))
    const dir = await ctx.sbx.files.getInfo(p('new/deep'))
    assert.equal(dir.type, ctx.sdk.FileType.DIR)
    assert.equal(dir.owner, 'user')
    assert.equal(dir.mode, 0o755)
  })

  it('write accepts a Blob and an ArrayBuffer', T, async () => {
    await ctx.sbx.files.write(p('blob.txt'), new Blob(['blob ', 'content']))
    assert.equal(await ctx.sbx.files.read(p('blob.txt')), 'blob content')
    await ctx.sbx.files.write(p('ab.txt'), new TextEncoder().encode('array buffer').buffer)
    assert.equal(await ctx.sbx.files.read(p('ab.txt')), 'array buffer')
  })

  it('write streams a ReadableStream (octet-stream upload)', T, async () => {
    const chunk = Buffer.alloc(64 * 1024, 'z')
    const info = await ctx.sbx.files.write(p('streamed.txt'), streamOf('head|', chunk, chunk, '|tail'))
    assert.equal(info.path, p('streamed.txt'))
    const back = await ctx.sbx.files.read(p('streamed.txt'), { format: 'bytes' })
    assert.equal(back.length, 5 + 2 * chunk.length + 5)
    assert.equal(Buffer.from(back).subarray(0, 5).toString(), 'head|')
    assert.equal(Buffer.from(back).subarray(-5).toString(), '|tail')
  })

  it('useOctetStream uploads a plain string as octet-stream', T, async () => {
    const info = await ctx.sbx.files.write(p('octet.txt'), 'octet body', { useOctetStream: true })
    assert.deepStrictEqual(defined({ ...info }), { name: 'octet.txt', path: p('octet.txt'), type: 'file' })
    assert.equal(await ctx.sbx.files.read(p('octet.txt')), 'octet body')
  })

  it('write of several files (absolute and relative paths) returns them in order', T, async () => {
    const infos = await ctx.sbx.files.write([
      { path: p('multi/one.txt'), data: 'one' },
      { path: `${ctx.rel}/multi/two.txt`, data: 'two' },
      { path: p('multi/sub/three.bin'), data: new Uint8Array([0, 1, 2, 255]).buffer },
    ])
    assert.deepStrictEqual(
      infos.map((i) => defined({ ...i })),
      [
        { name: 'one.txt', path: p('multi/one.txt'), type: 'file' },
        { name: 'two.txt', path: p('multi/two.txt'), type: 'file' },
        { name: 'three.bin', path: p('multi/sub/three.bin'), type: 'file' },
      ],
    )
    assert.equal(await ctx.sbx.files.read(p('multi/one.txt')), 'one')
    assert.equal(await ctx.sbx.files.read(p('multi/two.txt')), 'two')
    assert.deepStrictEqual([...(await ctx.sbx.files.read(p('multi/sub/three.bin'), { format: 'bytes' }))], [0, 1, 2, 255])
  })

  it('writeFiles writes several files, as root at the root of the filesystem too', T, async () => {
    const top = `/0-${ctx.rel}`
    try {
      const infos = await ctx.sbx.files.writeFiles(
        [
          { path: `${top}/a.txt`, data: 'A' },
          { path: `${top}/b/c.txt`, data: 'C' },
        ],
        { user: 'root' },
      )
      assert.deepStrictEqual(infos.map((i) => i.path), [`${top}/a.txt`, `${top}/b/c.txt`])
      assert.equal(await ctx.sbx.files.read(`${top}/b/c.txt`), 'C')
      assert.equal((await ctx.sbx.files.getInfo(`${top}/a.txt`)).owner, 'root')
    } finally {
      await ctx.sbx.commands.run(`rm -rf '${top}'`, { user: 'root' }).catch(() => {})
    }
  })

  it('write of an empty list returns an empty list', T, async () => {
    assert.deepStrictEqual(await ctx.sbx.files.write([]), [])
  })

  it('a 5 MB binary file round-trips byte for byte', T, async () => {
    const big = Buffer.alloc(5 * 1024 * 1024)
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i)
    await ctx.sbx.files.write(p('big.bin'), big.buffer.slice(big.byteOffset, big.byteOffset + big.length))
    const back = await ctx.sbx.files.read(p('big.bin'), { format: 'bytes' })
    assert.ok(Buffer.from(back).equals(big), 'content differs')
  })

  // ---------------------------------------------------------------- gzip
  for (const [wz, rz] of [[true, true], [true, false], [false, true]]) {
    it(`gzip: write gzip=${wz}, read gzip=${rz}`, T, async () => {
      const text = `compressible ${'abc'.repeat(5000)} ${uid()}`
      const name = `gz-${wz}-${rz}.txt`
      const info = await ctx.sbx.files.write(p(name), text, { gzip: wz })
      assert.equal(info.path, p(name))
      assert.equal(await ctx.sbx.files.read(p(name), { gzip: rz }), text)
      // What is stored is the plain text, not the gzip bytes.
      assert.equal((await ctx.sbx.files.getInfo(p(name))).size, Buffer.byteLength(text))
      const bytes = await ctx.sbx.files.read(p(name), { format: 'bytes', gzip: rz })
      assert.equal(Buffer.from(bytes).toString(), text)
    })
  }

  it('gzip: write of several files and a stream, read back as blob and stream', T, async () => {
    const infos = await ctx.sbx.files.write(
      [
        { path: p('gzm/a.txt'), data: 'gzip A' },
        { path: p('gzm/b.txt'), data: 'gzip B' },
      ],
      { gzip: true },
    )
    assert.deepStrictEqual(infos.map((i) => i.path), [p('gzm/a.txt'), p('gzm/b.txt')])
    await ctx.sbx.files.write(p('gzm/s.txt'), streamOf('streamed ', 'gzip'), { gzip: true })
    assert.equal(await (await ctx.sbx.files.read(p('gzm/a.txt'), { format: 'blob', gzip: true })).text(), 'gzip A')
    assert.equal((await readAll(await ctx.sbx.files.read(p('gzm/b.txt'), { format: 'stream', gzip: true }))).toString(), 'gzip B')
    assert.equal(await ctx.sbx.files.read(p('gzm/s.txt')), 'streamed gzip')
  })

  it('gzip: an empty file reads as empty', T, async () => {
    await ctx.sbx.files.write(p('gz-empty.txt'), '', { gzip: true })
    assert.equal(await ctx.sbx.files.read(p('gz-empty.txt'), { gzip: true }), '')
  })

  // ---------------------------------------------------------------- read/write errors
  it('read of a missing file rejects with FileNotFoundError', T, async () => {
    await rejectsWith(ctx.sbx.files.read(p(`missing-${uid()}.txt`)), ctx.sdk.FileNotFoundError)
    await rejectsWith(ctx.sbx.files.read(p(`missing-${uid()}.txt`), { format: 'bytes' }), ctx.sdk.FileNotFoundError)
  })

  it('read of a directory is an error', T, async () => {
    await rejectsWith(ctx.sbx.files.read(ctx.dir), ctx.sdk.SandboxError)
  })

  it('read and write as an unknown user are rejected', T, async () => {
    const user = `nosuchuser${uid()}`
    await ctx.sbx.files.write(p('u.txt'), 'u')
    await rejectsWith(ctx.sbx.files.read(p('u.txt'), { user }), ctx.sdk.AuthenticationError)
    await rejectsWith(ctx.sbx.files.write(p('u2.txt'), 'u', { user }), ctx.sdk.AuthenticationError)
    assert.equal(await ctx.sbx.files.exists(p('u2.txt')), false)
  })

  it('write below a regular file or onto a directory is an error', T, async () => {
    await ctx.sbx.files.write(p('plain'), 'x')
    await rejectsWith(ctx.sbx.files.write(p('plain/child.txt'), 'y'), ctx.sdk.SandboxError)
    await ctx.sbx.files.makeDir(p('adir'))
    await rejectsWith(ctx.sbx.files.write(p('adir'), 'y'), ctx.sdk.SandboxError)
    assert.equal((await ctx.sbx.files.getInfo(p('adir'))).type, ctx.sdk.FileType.DIR)
  })

  it('as root, relative paths resolve to /root and files belong to root', T, async () => {
    const info = await ctx.sbx.files.write(`${ctx.rel}/x.txt`, 'yes', { user: 'root' })
    assert.equal(info.path, `/root/${ctx.rel}/x.txt`)
    assert.equal(await ctx.sbx.files.read(`${ctx.rel}/x.txt`, { user: 'root' }), 'yes')
    const st = await ctx.sbx.files.getInfo(`/root/${ctx.rel}/x.txt`, { user: 'root' })
    assert.equal(st.owner, 'root')
    assert.equal(st.group, 'root')
  })

  // ---------------------------------------------------------------- getInfo / exists
  it('getInfo of a file: name, type, path, size, mode, permissions, owner, mtime', T, async () => {
    const before = Date.now()
    await ctx.sbx.files.write(p('info.txt'), '12345')
    const i = await ctx.sbx.files.getInfo(p('info.txt'))
    assert.equal(i.name, 'info.txt')
    assert.equal(i.type, ctx.sdk.FileType.FILE)
    assert.equal(i.path, p('info.txt'))
    assert.equal(i.size, 5)
    assert.equal(i.mode, 0o644)
    assert.equal(i.permissions, '-rw-r--r--')
    assert.equal(i.owner, 'user')
    assert.equal(i.group, 'user')
    assert.ok(i.modifiedTime instanceof Date, 'modifiedTime is a Date')
    assert.ok(Math.abs(i.modifiedTime.getTime() - before) < 60_000, `mtime ${i.modifiedTime.toISOString()} near now`)
    assert.equal(i.symlinkTarget, undefined)
  })

  it('getInfo of a directory and of a relative path', T, async () => {
    const i = await ctx.sbx.files.getInfo(ctx.rel)
    assert.equal(i.name, ctx.rel)
    assert.equal(i.path, ctx.dir)
    assert.equal(i.type, ctx.sdk.FileType.DIR)
    assert.equal(i.mode, 0o755)
    assert.equal(i.permissions, 'drwxr-xr-x')
    assert.equal(i.owner, 'user')
  })

  it('getInfo of a symlink reports the resolved target', T, async () => {
    await ctx.sbx.files.write(p('target.txt'), 'tt')
    await ctx.sbx.commands.run(`cd ${ctx.dir} && ln -s target.txt link.txt && ln -s ${ctx.dir} dirlink`)
    const i = await ctx.sbx.files.getInfo(p('link.txt'))
    assert.equal(i.name, 'link.txt')
    assert.equal(i.path, p('link.txt'))
    assert.equal(i.symlinkTarget, p('target.txt'))
    assert.equal(i.type, ctx.sdk.FileType.FILE)
    const d = await ctx.sbx.files.getInfo(p('dirlink'))
    assert.equal(d.symlinkTarget, ctx.dir)
    assert.equal(d.type, ctx.sdk.FileType.DIR)
  })

  it('getInfo of a missing path rejects with FileNotFoundError', T, async () => {
    await rejectsWith(ctx.sbx.files.getInfo(p(`nope-${uid()}`)), ctx.sdk.FileNotFoundError)
  })

  it('exists is true for files and directories, false for missing paths', T, async () => {
    await ctx.sbx.files.write(p('ex.txt'), 'e')
    assert.equal(await ctx.sbx.files.exists(p('ex.txt')), true)
    assert.equal(await ctx.sbx.files.exists(ctx.dir), true)
    assert.equal(await ctx.sbx.files.exists(`${ctx.rel}/ex.txt`), true)
    assert.equal(await ctx.sbx.files.exists(p(`nope-${uid()}`)), false)
  })

  // ---------------------------------------------------------------- list
  it('list returns entries of depth 1 sorted by name, with types and paths', T, async () => {
    const base = p('tree')
    await ctx.sbx.files.write([
      { path: `${base}/b.txt`, data: 'b' },
      { path: `${base}/a.txt`, data: 'a' },
      { path: `${base}/sub/c.txt`, data: 'c' },
      { path: `${base}/sub/deeper/d.txt`, data: 'd' },
      { path: `${base}/z/y.txt`, data: 'y' },
    ])
    const l1 = await ctx.sbx.files.list(base)
    assert.deepStrictEqual(
      l1.map((e) => [e.name, e.type, e.path]),
      [
        ['a.txt', ctx.sdk.FileType.FILE, `${base}/a.txt`],
        ['b.txt', ctx.sdk.FileType.FILE, `${base}/b.txt`],
        ['sub', ctx.sdk.FileType.DIR, `${base}/sub`],
        ['z', ctx.sdk.FileType.DIR, `${base}/z`],
      ],
    )
    const a = l1[0]
    assert.equal(a.size, 1)
    assert.equal(a.owner, 'user')
    assert.equal(a.permissions, '-rw-r--r--')
  })

  it('list with depth walks depth-first in name order', T, async () => {
    const base = p('tree2')
    await ctx.sbx.files.write([
      { path: `${base}/b.txt`, data: 'b' },
      { path: `${base}/a.txt`, data: 'a' },
      { path: `${base}/sub/c.txt`, data: 'c' },
      { path: `${base}/sub/deeper/d.txt`, data: 'd' },
      { path: `${base}/z/y.txt`, data: 'y' },
    ])
    const l2 = await ctx.sbx.files.list(base, { depth: 2 })
    assert.deepStrictEqual(
      l2.map((e) => e.path.slice(base.length + 1)),
      ['a.txt', 'b.txt', 'sub', 'sub/c.txt', 'sub/deeper', 'z', 'z/y.txt'],
    )
    assert.deepStrictEqual(
      l2.map((e) => e.name),
      ['a.txt', 'b.txt', 'sub', 'c.txt', 'deeper', 'z', 'y.txt'],
    )
    const l3 = await ctx.sbx.files.list(base, { depth: 3 })
    assert.deepStrictEqual(
      l3.map((e) => e.path.slice(base.length + 1)),
      ['a.txt', 'b.txt', 'sub', 'sub/c.txt', 'sub/deeper', 'sub/deeper/d.txt', 'z', 'z/y.txt'],
    )
  })

  it('list of a relative path returns absolute paths; an empty directory lists empty', T, async () => {
    await ctx.sbx.files.write(p('rel/f.txt'), 'f')
    const l = await ctx.sbx.files.list(`${ctx.rel}/rel`)
    assert.deepStrictEqual(l.map((e) => e.path), [p('rel/f.txt')])
    await ctx.sbx.files.makeDir(p('emptydir'))
    assert.deepStrictEqual(await ctx.sbx.files.list(p('emptydir')), [])
  })

  it('list shows symlinks with their target', T, async () => {
    await ctx.sbx.files.write(p('ls/real.txt'), 'r')
    await ctx.sbx.commands.run(`ln -s real.txt ${p('ls/link.txt')}`)
    const l = await ctx.sbx.files.list(p('ls'))
    const link = l.find((e) => e.name === 'link.txt')
    assert.ok(link, `link listed: ${JSON.stringify(l.map((e) => e.name))}`)
    assert.equal(link.symlinkTarget, p('ls/real.txt'))
  })

  it('list of a file is an error; list of a missing path is FileNotFoundError', T, async () => {
    await ctx.sbx.files.write(p('notadir.txt'), 'x')
    await rejectsWith(ctx.sbx.files.list(p('notadir.txt')), ctx.sdk.SandboxError)
    await rejectsWith(ctx.sbx.files.list(p(`missing-${uid()}`)), ctx.sdk.FileNotFoundError)
  })

  // ---------------------------------------------------------------- makeDir / remove / rename
  it('makeDir returns true when it creates, false when the directory exists', T, async () => {
    assert.equal(await ctx.sbx.files.makeDir(p('mk/a/b')), true)
    assert.equal(await ctx.sbx.files.makeDir(p('mk/a/b')), false)
    assert.equal(await ctx.sbx.files.makeDir(p('mk/a')), false)
    const i = await ctx.sbx.files.getInfo(p('mk/a'))
    assert.equal(i.type, ctx.sdk.FileType.DIR)
    assert.equal(i.owner, 'user')
    assert.equal(i.permissions, 'drwxr-xr-x')
  })

  it('makeDir on an existing file is an error', T, async () => {
    await ctx.sbx.files.write(p('mkfile'), 'x')
    await rejectsWith(ctx.sbx.files.makeDir(p('mkfile')), ctx.sdk.SandboxError)
  })

  it('remove deletes files and whole directories; removing a missing path is fine', T, async () => {
    await ctx.sbx.files.write(p('rm/x/y.txt'), 'y')
    await ctx.sbx.files.write(p('rm/f.txt'), 'f')
    await ctx.sbx.files.remove(p('rm/f.txt'))
    assert.equal(await ctx.sbx.files.exists(p('rm/f.txt')), false)
    await ctx.sbx.files.remove(p('rm'))
    assert.equal(await ctx.sbx.files.exists(p('rm')), false)
    await ctx.sbx.files.remove(p(`rm-missing-${uid()}`))
  })

  it('rename moves a file, returns its new info and keeps the content', T, async () => {
    await ctx.sbx.files.write(p('old.txt'), 'moved content')
    const i = await ctx.sbx.files.rename(p('old.txt'), p('renamed/new.txt'))
    assert.equal(i.name, 'new.txt')
    assert.equal(i.path, p('renamed/new.txt'))
    assert.equal(i.type, ctx.sdk.FileType.FILE)
    assert.equal(await ctx.sbx.files.exists(p('old.txt')), false)
    assert.equal(await ctx.sbx.files.read(p('renamed/new.txt')), 'moved content')
  })

  it('rename moves a directory with its content', T, async () => {
    await ctx.sbx.files.write(p('mvdir/inner.txt'), 'inner')
    const i = await ctx.sbx.files.rename(p('mvdir'), p('mvdir2'))
    assert.equal(i.type, ctx.sdk.FileType.DIR)
    assert.equal(await ctx.sbx.files.read(p('mvdir2/inner.txt')), 'inner')
  })

  it('rename of a missing path rejects with FileNotFoundError', T, async () => {
    await rejectsWith(ctx.sbx.files.rename(p(`nope-${uid()}`), p('whatever')), ctx.sdk.FileNotFoundError)
  })

  // ---------------------------------------------------------------- metadata (newer SDKs)
  it('metadata round-trips through write, getInfo, list and rename', T, async (t) => {
    if (!hasMetadata()) return t.skip(`${ctx.version} has no file metadata`)
    const info = await ctx.sbx.files.write(p('meta.txt'), 'm', { metadata: { Owner: 'alice', purpose: 'e2e test' } })
    assert.deepStrictEqual(info.metadata, { owner: 'alice', purpose: 'e2e test' })
    assert.deepStrictEqual((await ctx.sbx.files.getInfo(p('meta.txt'))).metadata, { owner: 'alice', purpose: 'e2e test' })
    const listed = (await ctx.sbx.files.list(ctx.dir)).find((e) => e.name === 'meta.txt')
    assert.deepStrictEqual(listed.metadata, { owner: 'alice', purpose: 'e2e test' })
    const moved = await ctx.sbx.files.rename(p('meta.txt'), p('meta2.txt'))
    assert.deepStrictEqual(moved.metadata, { owner: 'alice', purpose: 'e2e test' })
    // Each upload replaces the metadata.
    await ctx.sbx.files.write(p('meta2.txt'), 'm2', { metadata: { only: 'this' } })
    assert.deepStrictEqual((await ctx.sbx.files.getInfo(p('meta2.txt'))).metadata, { only: 'this' })
    const plain = await ctx.sbx.files.write(p('meta2.txt'), 'm3')
    assert.equal(plain.metadata, undefined)
    assert.equal((await ctx.sbx.files.getInfo(p('meta2.txt'))).metadata, undefined)
  })

  it('metadata set as a user.e2b.* xattr inside the sandbox is reported', T, async (t) => {
    if (!hasMetadata()) return t.skip(`${ctx.version} has no file metadata`)
    await ctx.sbx.files.write(p('xattr.txt'), 'x')
    await ctx.sbx.commands.run(`python3 -c "import os; os.setxattr('${p('xattr.txt')}', 'user.e2b.color', b'blue'); os.setxattr('${p('xattr.txt')}', 'user.other', b'hidden')"`)
    assert.deepStrictEqual((await ctx.sbx.files.getInfo(p('xattr.txt'))).metadata, { color: 'blue' })
  })

  it('metadata is applied to every file of a multi-file write', T, async (t) => {
    if (!hasMetadata()) return t.skip(`${ctx.version} has no file metadata`)
    const infos = await ctx.sbx.files.write(
      [
        { path: p('mm/a'), data: 'a' },
        { path: p('mm/b'), data: 'b' },
      ],
      { metadata: { batch: '7' } },
    )
    assert.deepStrictEqual(infos.map((i) => i.metadata), [{ batch: '7' }, { batch: '7' }])
    assert.deepStrictEqual((await ctx.sbx.files.getInfo(p('mm/b'))).metadata, { batch: '7' })
  })
})
