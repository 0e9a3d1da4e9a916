// bench/volume/mount-create.mjs: the extra create time a volume mount costs. Against a running
// `warren serve` (E2B_API_URL, E2B_API_KEY): creates N sandboxes of base without and N with one
// volume mounted, one at a time, and prints the median and p90 of each and the difference. A
// sandbox with mounts never takes a warm-pool container, so name a template without a pool (argv[3])
// or run the server with --warm-pool 0 for a like-for-like figure.
import { createRequire } from 'node:module'

const require = createRequire(new URL('../../test/e2e/package.json', import.meta.url))
const { Sandbox, Volume } = await import(require.resolve('e2b'))

const n = Number(process.argv[2] || 10)
const template = process.argv[3] || 'base' // one without a warm pool gives a like-for-like figure
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]
async function timeCreate(opts) {
  const t0 = performance.now()
  const s = await Sandbox.create(template, { timeoutMs: 60_000, ...opts })
  const ms = performance.now() - t0
  await Sandbox.kill(s.sandboxId)
  return ms
}
const vol = await Volume.create(`bench-${Date.now()}`)
try {
  const plain = [], mounted = []
  await timeCreate({}) // warm the engine's caches
  for (let i = 0; i < n; i++) {
    plain.push(await timeCreate({}))
    mounted.push(await timeCreate({ volumeMounts: { '/mnt/vol': vol } }))
  }
  const f = (x) => x.toFixed(0)
  console.log(`create without a mount: median ${f(pct(plain, 0.5))} ms, p90 ${f(pct(plain, 0.9))} ms (n=${n})`)
  console.log(`create with one mount:  median ${f(pct(mounted, 0.5))} ms, p90 ${f(pct(mounted, 0.9))} ms (n=${n})`)
  console.log(`extra for a mount: ${f(pct(mounted, 0.5) - pct(plain, 0.5))} ms at the median`)
} finally {
  await Volume.destroy(vol.volumeId)
}
