// containers.mjs: what a Warren server's containers hold on this host, read from /proc: the PSS
// of each container's processes, its containerd shim and its docker-proxy (bench/idle, and the
// warm pool's memory in bench/burst).
import { execFile } from 'node:child_process'
import { readFile, readdir } from 'node:fs/promises'
import { promisify } from 'node:util'
import { LABEL_MANAGED } from '../test/e2e/server/harness.mjs'

const run = promisify(execFile)

/** PSS in kB of every process of a memory() entry: its container's, its shim's, its proxy's. */
export const pssKB = (c) => c.parts.container + c.parts.shim + c.parts.proxy

/** kB of a "Name:   123 kB" line of a /proc file, or 0. */
export function kbField(text, name) {
  const m = text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))
  return m ? Number(m[1]) : 0
}

export async function smaps(pid) {
  try {
    const [t, status] = await Promise.all([readFile(`/proc/${pid}/smaps_rollup`, 'utf8'), readFile(`/proc/${pid}/status`, 'utf8')])
    return { rss: kbField(t, 'Rss'), pss: kbField(t, 'Pss'), anon: kbField(t, 'Pss_Anon'), threads: Number(status.match(/^Threads:\s+(\d+)/m)?.[1] ?? 0) }
  } catch {
    return undefined // gone meanwhile
  }
}

/** Every process on the host: pid, its cgroup file's text and its command line. */
export async function processes() {
  const out = []
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const [cgroup, cmdline] = await Promise.all([
        readFile(`/proc/${name}/cgroup`, 'utf8'),
        readFile(`/proc/${name}/cmdline`, 'utf8'),
      ])
      out.push({ pid: Number(name), cgroup, argv: cmdline.split('\0').filter(Boolean) })
    } catch {}
  }
  return out
}

/**
 * The containers of the server named serverName: ID, sandbox ID, IPs; pooled unless one of
 * sandboxes (a Set of sandbox IDs) runs in it.
 */
export async function containers(serverName, sandboxes) {
  const { stdout } = await run('docker', ['ps', '-q', '--no-trunc', '--filter', `label=${LABEL_MANAGED}=${serverName}`])
  const ids = stdout.split('\n').filter(Boolean)
  const out = []
  for (let i = 0; i < ids.length; i += 100) {
    const { stdout: js } = await run('docker', ['inspect', ...ids.slice(i, i + 100)], { maxBuffer: 256 << 20 })
    for (const c of JSON.parse(js)) {
      out.push({
        id: c.Id,
        sandbox: c.Config.Labels['dev.warren.sandbox'],
        // A claimed pool container keeps its pool label; its sandbox takes its sandbox ID.
        pooled: !sandboxes.has(c.Config.Labels['dev.warren.sandbox']),
        ips: Object.values(c.NetworkSettings.Networks ?? {}).map((n) => n.IPAddress).filter(Boolean),
      })
    }
  }
  return out
}

/**
 * memory reads the PSS of every process of each container: in its cgroup, its shim, its
 * docker-proxy. Returns per-container sums (kB) by part.
 */
export async function memory(cs) {
  const procs = await processes()
  const byId = new Map(cs.map((c) => [c.id, { ...c, anon: 0, parts: { container: 0, shim: 0, proxy: 0 }, pids: { container: 0, shim: 0, proxy: 0 }, threads: { container: 0, shim: 0, proxy: 0 } }]))
  const byIP = new Map()
  for (const c of byId.values()) for (const ip of c.ips) byIP.set(ip, c)
  const add = async (c, part, pid) => {
    const m = await smaps(pid)
    if (!m) return
    c.parts[part] += m.pss
    if (part === 'container') c.anon += m.anon
    c.pids[part]++
    c.threads[part] += m.threads
  }
  const work = []
  for (const p of procs) {
    // The container's own processes: any cgroup line naming its ID (cgroup v1 and v2, runc and runsc).
    const cid = p.cgroup.match(/[0-9a-f]{64}/g)?.find((id) => byId.has(id))
    if (cid) {
      work.push(add(byId.get(cid), 'container', p.pid))
      continue
    }
    const base = (p.argv[0] ?? '').split('/').pop()
    if (base.startsWith('containerd-shim')) {
      const i = p.argv.indexOf('-id')
      const c = i >= 0 && byId.get(p.argv[i + 1])
      if (c) work.push(add(c, 'shim', p.pid))
    } else if (base === 'docker-proxy') {
      const i = p.argv.indexOf('-container-ip')
      const c = i >= 0 && byIP.get(p.argv[i + 1])
      if (c) work.push(add(c, 'proxy', p.pid))
    }
  }
  await Promise.all(work)
  return [...byId.values()]
}

