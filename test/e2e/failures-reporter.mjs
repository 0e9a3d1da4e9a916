// A node --test reporter that writes one line per failed test or hook: its file, its name and
// the first lines of its error. The suites' scripts print these lines last, after the servers'
// log tails, so that a run whose end is all that is seen (test.sh's summary, CI's record) says
// what failed and why.
import { basename } from 'node:path'

// oneLine is the first two non-empty lines of s (an assertion's message says what differs on
// its second), joined, at most max characters.
const oneLine = (s, max) => {
  const line = String(s ?? '').split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 2).join(' ')
  return line.length > max ? line.slice(0, max - 1) + '…' : line
}

export default async function* failures(source) {
  for await (const { type, data } of source) {
    if (type !== 'test:fail') continue
    // A suite fails when a test in it does: only the tests and hooks themselves are worth a line.
    if (data.details?.type === 'suite' && data.details?.error?.failureType === 'subtestsFailed') continue
    const err = data.details?.error
    const cause = err?.cause ?? err
    const why = oneLine(cause?.message ?? cause, 160) || err?.failureType || 'failed'
    yield `${data.file ? basename(data.file) : '?'}: ${data.name}: ${why}\n`
  }
}
