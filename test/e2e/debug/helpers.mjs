// Shared helpers for the debug-mode end-to-end tests.
//
// In debug mode (E2B_DEBUG=true) the e2b SDK makes no control-plane call: Sandbox.create()
// returns a handle that talks straight to the agent on http://localhost:49983, which
// debug-sandbox.sh started inside a warren/base container. Every test file runs its cases
// against each SDK version listed in SDKS.
import { describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { loadSdks, sleep, uid } from '../common.mjs'

export { rejectsWith, sleep, uid } from '../common.mjs'

process.env.E2B_DEBUG ??= 'true'

export const SDKS = await loadSdks()

/** Port of the second ("secure") agent started with an access token. */
export const SECURE_PORT = Number(process.env.WARREN_E2E_SECURE_PORT || 49984)
/** Access token the secure agent was initialised with. */
export const SECURE_TOKEN = process.env.WARREN_E2E_SECURE_TOKEN || ''

/** Parses "2.51.0" from the describe label for version gates. */
export function sdkMinor(version) {
  return Number(version.split('.')[1])
}

/**
 * describeEachSdk declares `title` once per SDK version. `body(ctx)` runs inside the describe
 * with ctx = { sdk, version, sbx (set in before), dir (absolute per-suite scratch dir),
 * rel (the same dir relative to /home/user), track(pid) }. The scratch dir and every tracked
 * process are removed after the suite, whatever the outcome.
 */
export function describeEachSdk(title, body) {
  for (const [version, sdk] of SDKS) {
    describe(`${title} [${version}]`, () => {
      const rel = `e2e-${version.replace(/[^0-9]/g, '')}-${uid()}`
      const ctx = {
        sdk,
        version,
        sbx: undefined,
        rel,
        dir: `/home/user/${rel}`,
        pids: new Set(),
        track(pid) {
          ctx.pids.add(pid)
          return pid
        },
      }
      before(async () => {
        ctx.sbx = await sdk.Sandbox.create()
        await ctx.sbx.files.makeDir(ctx.dir)
      })
      after(async () => {
        if (!ctx.sbx) return
        for (const pid of ctx.pids) {
          await ctx.sbx.commands.kill(pid).catch(() => {})
        }
        await ctx.sbx.commands
          .run(`rm -rf '${ctx.dir}' '/root/${rel}' '/tmp/${rel}'`, { user: 'root' })
          .catch(() => {})
      })
      body(ctx)
    })
  }
}

/** Polls `fn` until it returns a truthy value or `timeoutMs` passes; returns the value. */
export async function waitFor(fn, { timeoutMs = 10_000, intervalMs = 50, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  let last
  for (;;) {
    try {
      last = await fn()
      if (last) return last
    } catch (e) {
      last = e
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last?.message ?? last})`)
    }
    await sleep(intervalMs)
  }
}

/** Removes properties whose value is undefined, so deepStrictEqual sees what a user sees. */
export function defined(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined))
}

/** Reads a ReadableStream<Uint8Array> to one Buffer. */
export async function readAll(stream) {
  const chunks = []
  for await (const c of stream) chunks.push(Buffer.from(c))
  return Buffer.concat(chunks)
}

/** A ReadableStream that yields the given chunks. */
export function streamOf(...chunks) {
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(typeof c === 'string' ? new TextEncoder().encode(c) : c)
      controller.close()
    },
  })
}

/** Every byte value 0..255, `times` times: binary data that is not valid UTF-8. */
export function allBytes(times = 1) {
  const b = Buffer.alloc(256 * times)
  for (let i = 0; i < b.length; i++) b[i] = i % 256
  return b
}

export { assert }
