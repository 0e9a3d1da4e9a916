// tls-suite.mjs: run by tls.test.mjs in a child node with NODE_EXTRA_CA_CERTS, dns-hook.mjs,
// E2B_DOMAIN=<domain>:<tls port> and no E2B_SANDBOX_URL. Not a *.test.mjs file: on its own it
// has no server.
import { it } from 'node:test'
import { assert, describeEachSdk, startHttpServer, uid } from './helpers.mjs'

assert.ok(!process.env.E2B_SANDBOX_URL, 'E2B_SANDBOX_URL must be unset')
assert.ok(process.env.NODE_EXTRA_CA_CERTS, 'NODE_EXTRA_CA_CERTS must be set')
const domain = process.env.E2B_DOMAIN

describeEachSdk('default https URLs', (ctx) => {
  it('create, commands, files, getHost, signed download URL, isRunning after kill', async () => {
    const before = globalThis.__warrenDnsLookups
    const sbx = await ctx.create({ secure: true, timeoutMs: 120_000 })
    // Commands and files go to https://49983-<id>.<domain>.
    const r = await sbx.commands.run('echo hello over tls')
    assert.equal(r.stdout, 'hello over tls\n')
    const content = `tls ${uid()}`
    await sbx.files.write('/home/user/tls.txt', content)
    assert.equal(await sbx.files.read('/home/user/tls.txt'), content)
    assert.ok(globalThis.__warrenDnsLookups > before, 'the SDK did not resolve through Warren DNS')

    // A server inside, reached the way E2B's docs show: fetch('https://' + getHost(port)).
    await startHttpServer(sbx, 8000, '/home/user/www', { 'index.txt': 'served over tls' })
    const host = sbx.getHost(8000)
    assert.equal(host, `8000-${sbx.sandboxId}.${domain}`)
    const res = await fetch(`https://${host}/index.txt`)
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'served over tls')

    // A signed download URL of a secure sandbox works with a plain fetch.
    const url = await sbx.downloadUrl('/home/user/tls.txt')
    assert.match(url, new RegExp(`^https://49983-${sbx.sandboxId}\\.${domain.replace(/[.]/g, '\\.')}/files\\?`))
    assert.match(url, /signature=/)
    const dl = await fetch(url)
    assert.equal(dl.status, 200)
    assert.equal(await dl.text(), content)

    assert.equal(await sbx.isRunning(), true)
    await sbx.kill()
    assert.equal(await sbx.isRunning(), false)
  })
})
