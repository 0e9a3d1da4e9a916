// sandbox.getHost(port) in debug mode is localhost:<port>; debug-sandbox.sh publishes 8000.
import { it } from 'node:test'
import { assert, describeEachSdk, waitFor, uid } from './helpers.mjs'

describeEachSdk('getHost', (ctx) => {
  it('an HTTP server on port 8000 inside the sandbox answers at getHost(8000)', { timeout: 30_000 }, async () => {
    const body = `served ${uid()}\n`
    await ctx.sbx.files.write(`${ctx.dir}/www/index.txt`, body)
    const server = await ctx.sbx.commands.run('python3 -m http.server 8000', {
      background: true,
      cwd: `${ctx.dir}/www`,
      timeoutMs: 0,
    })
    ctx.track(server.pid)
    try {
      const host = ctx.sbx.getHost(8000)
      assert.equal(host, 'localhost:8000')
      const res = await waitFor(
        async () => {
          const r = await fetch(`http://${host}/index.txt`, { signal: AbortSignal.timeout(2000) })
          return r.status === 200 ? r : undefined
        },
        { timeoutMs: 15_000, intervalMs: 200, what: 'the http server to answer' },
      )
      assert.equal(await res.text(), body)
    } finally {
      await server.kill()
    }
  })
})
