// listing.mjs: timed listings of a server's sandboxes, which bench/server and bench/idle print.

/**
 * timeListings lists the `expected` live sandboxes `runs` times three ways and returns the
 * times in ms: `sdkAll`, Sandbox.list() of all of them (pages of 100, the SDK's largest);
 * `rawPage`, one raw GET /v2/sandboxes?limit=100; `rawAll`, all of them by raw GETs following
 * X-Next-Token. A listing that does not see `expected` sandboxes throws.
 */
export async function timeListings({ Sandbox, server, expected, runs }) {
  const now = () => performance.now()
  const out = { sdkAll: [], rawPage: [], rawAll: [] }
  for (let i = 0; i < runs; i++) {
    let t = now()
    const p = Sandbox.list({ limit: 100 })
    let count = 0
    while (p.hasNext) count += (await p.nextItems()).length
    out.sdkAll.push(now() - t)
    if (count !== expected) throw new Error(`Sandbox.list() listed ${count}, expected ${expected}`)
    t = now()
    const r = await server.api('/v2/sandboxes?limit=100')
    await r.arrayBuffer()
    out.rawPage.push(now() - t)
    t = now()
    let token = ''
    let seen = 0
    do {
      const q = token ? `&nextToken=${encodeURIComponent(token)}` : ''
      const rr = await server.api(`/v2/sandboxes?limit=100${q}`)
      seen += (await rr.json()).length
      token = rr.headers.get('x-next-token') ?? ''
    } while (token)
    out.rawAll.push(now() - t)
    if (seen !== expected) throw new Error(`raw listing saw ${seen}, expected ${expected}`)
  }
  return out
}
