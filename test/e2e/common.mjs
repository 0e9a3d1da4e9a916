// Helpers shared by the debug-mode (debug/) and server (server/) end-to-end tests: the SDK
// versions under test and small test utilities. Suite setup (describeEachSdk) and polling
// (waitFor) differ between the two and stay in each suite's helpers.mjs.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'

/**
 * The SDK versions under test, as [label, module] pairs. The modules are imported when this is
 * called, so that a suite can set E2B_* environment variables before the SDKs load.
 */
export async function loadSdks() {
  return [
    ['e2b 2.51', await import('e2b')],
    ['e2b 2.19', await import('e2b-2-19')],
  ]
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** A short random suffix for names of things a test creates, and for metadata values. */
export function uid() {
  return randomBytes(5).toString('hex')
}

/** Awaits `promise` and asserts it rejects with an instance of `cls` (and, optionally, a message match). */
export async function rejectsWith(promise, cls, messageRe) {
  let err
  try {
    await promise
  } catch (e) {
    err = e
  }
  assert.ok(err, `expected a rejection with ${cls.name}, but it resolved`)
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`)
  if (messageRe) assert.match(err.message, messageRe)
  return err
}
