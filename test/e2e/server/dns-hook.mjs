// dns-hook.mjs: makes this node process resolve *.<domain> through Warren's own DNS server,
// without touching the system resolver. Load it before anything else:
//
//   WARREN_E2E_DNS_SERVER=127.0.0.1:5353 WARREN_E2E_DNS_DOMAIN=warren.test \
//     node --import ./server/dns-hook.mjs script.mjs
//
// It wraps dns.lookup, which net.connect and tls.connect call for a host name and so does the
// fetch built into node (undici) that the e2b SDK uses. Names under the domain are asked of
// WARREN_E2E_DNS_SERVER (A records, or AAAA for family 6); every other name goes to the
// original lookup. A lookup is counted in globalThis.__warrenDnsLookups, so tests can check the
// hook was used.
import dns from 'node:dns'

const server = process.env.WARREN_E2E_DNS_SERVER
const domain = process.env.WARREN_E2E_DNS_DOMAIN?.toLowerCase().replace(/\.$/, '')
if (!server || !domain) throw new Error('dns-hook: set WARREN_E2E_DNS_SERVER and WARREN_E2E_DNS_DOMAIN')

const resolver = new dns.Resolver({ timeout: 2000, tries: 2 })
resolver.setServers([server])
const original = dns.lookup
globalThis.__warrenDnsLookups = 0

const ours = (host) => {
  const h = String(host).toLowerCase().replace(/\.$/, '')
  return h === domain || h.endsWith(`.${domain}`)
}

dns.lookup = function lookup(hostname, options, callback) {
  if (typeof options === 'function') [options, callback] = [{}, options]
  if (!ours(hostname)) return original.call(this, hostname, options, callback)
  const opts = typeof options === 'number' ? { family: options } : { ...options }
  const family = opts.family === 6 || opts.family === 'IPv6' ? 6 : 4
  globalThis.__warrenDnsLookups++
  const resolve = family === 6 ? resolver.resolve6.bind(resolver) : resolver.resolve4.bind(resolver)
  resolve(hostname, (err, addrs) => {
    if (err) return callback(err)
    if (!addrs.length) return callback(Object.assign(new Error(`dns-hook: no address for ${hostname}`), { code: 'ENOTFOUND' }))
    if (opts.all) return callback(null, addrs.map((address) => ({ address, family })))
    callback(null, addrs[0], family)
  })
}
