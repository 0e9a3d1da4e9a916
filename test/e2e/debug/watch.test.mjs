// sandbox.files.watchDir: events, recursion, includeEntry, stop, errors.
import { it } from 'node:test'
import { assert, describeEachSdk, rejectsWith, waitFor, sleep, uid, sdkMinor } from './helpers.mjs'

const T = { timeout: 30_000 }

describeEachSdk('watchDir', (ctx) => {
  const p = (name) => `${ctx.dir}/${name}`

  /** Starts a watch on a fresh directory; returns { dir, events, handle }. */
  async function watch(name, opts = {}) {
    const dir = p(name)
    await ctx.sbx.files.makeDir(dir)
    const events = []
    const handle = await ctx.sbx.files.watchDir(dir, (e) => events.push(e), opts)
    return { dir, events, handle }
  }
  const has = (events, name, type) => events.some((e) => e.name === name && (!type || e.type === type))
  const show = (events) => JSON.stringify(events.map((e) => `${e.type}:${e.name}`))

  it('a write in the watched directory produces create and write events with the file name', T, async () => {
    const { dir, events, handle } = await watch('w1')
    try {
      await ctx.sbx.files.write(`${dir}/file.txt`, 'hello')
      const E = ctx.sdk.FilesystemEventType
      await waitFor(() => has(events, 'file.txt', E.WRITE), { what: `write event in ${show(events)}` })
      assert.ok(has(events, 'file.txt', E.CREATE), `create event in ${show(events)}`)
      for (const e of events) assert.equal(e.name, 'file.txt')
    } finally {
      await handle.stop()
    }
  })

  it('remove, rename and chmod produce their events', T, async () => {
    const { dir, events, handle } = await watch('w2')
    const E = ctx.sdk.FilesystemEventType
    try {
      await ctx.sbx.commands.run(`cd ${dir} && echo a > a.txt && chmod 600 a.txt && mv a.txt b.txt && rm b.txt`)
      await waitFor(() => has(events, 'b.txt', E.REMOVE), { what: `remove event in ${show(events)}` })
      assert.ok(has(events, 'a.txt', E.CHMOD), `chmod event in ${show(events)}`)
      assert.ok(has(events, 'a.txt', E.RENAME), `rename event in ${show(events)}`)
      assert.ok(has(events, 'b.txt', E.CREATE), `create event for the rename target in ${show(events)}`)
    } finally {
      await handle.stop()
    }
  })

  it('without recursive, events in subdirectories are not reported', T, async () => {
    const { dir, events, handle } = await watch('w3')
    try {
      await ctx.sbx.files.makeDir(`${dir}/sub`)
      await waitFor(() => has(events, 'sub'), { what: `event for sub in ${show(events)}` })
      await ctx.sbx.files.write(`${dir}/sub/inner.txt`, 'x')
      await ctx.sbx.files.write(`${dir}/top.txt`, 'x')
      await waitFor(() => has(events, 'top.txt'), { what: `event for top.txt in ${show(events)}` })
      await sleep(300)
      assert.ok(!events.some((e) => e.name.includes('inner')), `no nested events: ${show(events)}`)
    } finally {
      await handle.stop()
    }
  })

  it('recursive reports nested names relative to the watched directory', T, async () => {
    const dir = p('w4')
    await ctx.sbx.files.makeDir(`${dir}/sub/deep`)
    const events = []
    const handle = await ctx.sbx.files.watchDir(dir, (e) => events.push(e), { recursive: true })
    const E = ctx.sdk.FilesystemEventType
    try {
      await ctx.sbx.files.write(`${dir}/sub/file.txt`, 'x')
      await ctx.sbx.files.write(`${dir}/sub/deep/more.txt`, 'y')
      await waitFor(() => has(events, 'sub/file.txt', E.WRITE) && has(events, 'sub/deep/more.txt', E.WRITE), {
        what: `nested write events in ${show(events)}`,
      })
    } finally {
      await handle.stop()
    }
  })

  it('recursive picks up directories created after the watch started', T, async () => {
    const { dir, events, handle } = await watch('w5', { recursive: true })
    const E = ctx.sdk.FilesystemEventType
    try {
      await ctx.sbx.files.makeDir(`${dir}/new`)
      await waitFor(() => has(events, 'new', E.CREATE), { what: `create event for new/ in ${show(events)}` })
      await sleep(200)
      await ctx.sbx.files.makeDir(`${dir}/new/nested`)
      await waitFor(() => has(events, 'new/nested', E.CREATE), { what: `create event for new/nested in ${show(events)}` })
      await sleep(200)
      await ctx.sbx.files.write(`${dir}/new/nested/f.txt`, 'z')
      await waitFor(() => has(events, 'new/nested/f.txt', E.WRITE), { what: `write event in ${show(events)}` })
    } finally {
      await handle.stop()
    }
  })

  it('includeEntry attaches the entry info to create and write events', T, async (t) => {
    if (sdkMinor(ctx.version) < 45) return t.skip(`${ctx.version} has no includeEntry`)
    const { dir, events, handle } = await watch('w6', { includeEntry: true })
    const E = ctx.sdk.FilesystemEventType
    try {
      await ctx.sbx.files.write(`${dir}/entry.txt`, 'abc')
      await waitFor(() => events.find((e) => e.name === 'entry.txt' && e.type === E.WRITE && e.entry?.size === 3), {
        what: `write event with entry of size 3 in ${JSON.stringify(events)}`,
      })
      // The write event's entry: the create event may be stat'ed before the agent hands the new
      // file to its user (create, then chown), as with envd.
      const e = events.find((x) => x.name === 'entry.txt' && x.type === E.WRITE && x.entry?.size === 3)
      assert.equal(e.entry.name, 'entry.txt')
      assert.equal(e.entry.path, `${dir}/entry.txt`)
      assert.equal(e.entry.type, ctx.sdk.FileType.FILE)
      assert.equal(e.entry.owner, 'user')
    } finally {
      await handle.stop()
    }
  })

  it('without includeEntry, events carry no entry', T, async () => {
    const { dir, events, handle } = await watch('w7')
    try {
      await ctx.sbx.files.write(`${dir}/x.txt`, 'x')
      await waitFor(() => has(events, 'x.txt'), { what: 'an event' })
      for (const e of events) assert.equal(e.entry, undefined)
    } finally {
      await handle.stop()
    }
  })

  it('stop() ends the watch: no more events and onExit is called', T, async () => {
    const dir = p('w8')
    await ctx.sbx.files.makeDir(dir)
    const events = []
    let exited = false
    const handle = await ctx.sbx.files.watchDir(dir, (e) => events.push(e), {
      onExit: () => {
        exited = true
      },
    })
    await ctx.sbx.files.write(`${dir}/before.txt`, 'x')
    await waitFor(() => has(events, 'before.txt'), { what: 'event before stop' })
    await handle.stop()
    await waitFor(() => exited, { what: 'onExit after stop' })
    await ctx.sbx.files.write(`${dir}/after.txt`, 'x')
    await sleep(500)
    assert.ok(!has(events, 'after.txt'), `no events after stop: ${show(events)}`)
  })

  it('watching a directory that does not exist rejects with FileNotFoundError', T, async () => {
    await rejectsWith(ctx.sbx.files.watchDir(p(`missing-${uid()}`), () => {}), ctx.sdk.FileNotFoundError)
  })

  it('watching a file is an error', T, async () => {
    await ctx.sbx.files.write(p('watched-file.txt'), 'x')
    await rejectsWith(ctx.sbx.files.watchDir(p('watched-file.txt'), () => {}), ctx.sdk.SandboxError)
  })

  it('a watch with a short timeoutMs ends by itself and reports it to onExit', T, async () => {
    const dir = p('w9')
    await ctx.sbx.files.makeDir(dir)
    let exitErr = 'not called'
    await ctx.sbx.files.watchDir(dir, () => {}, {
      timeoutMs: 1000,
      onExit: (err) => {
        exitErr = err
      },
    })
    await waitFor(() => exitErr !== 'not called', { timeoutMs: 8000, what: 'onExit after the watch timeout' })
    assert.ok(exitErr instanceof ctx.sdk.TimeoutError, `onExit got ${exitErr?.constructor?.name}: ${exitErr?.message}`)
  })
})
