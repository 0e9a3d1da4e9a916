// test-ca.mjs: a throwaway CA for egress targets (egress-rules.test.mjs, bench/egress): made on
// the host with openssl before the server starts, so the server can trust it (--egress-trust-ca),
// and a leaf it signs inside a target sandbox (whose openssl does the work) or on the host (for a
// target outside the sandboxes), for the names and addresses given.
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

/** Makes a CA in a new temp dir; returns its paths and remove(). */
export async function makeCA(cn) {
  const dir = await mkdtemp(join(tmpdir(), 'warren-test-ca-'))
  const cert = join(dir, 'ca.pem'), key = join(dir, 'ca.key')
  await promisify(execFile)('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', key, '-out', cert, '-days', '1', '-subj', `/CN=${cn}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign'])
  return { cert, key, remove: () => rm(dir, { recursive: true, force: true }) }
}

/**
 * Signs, in sbx, a server certificate for sans (e.g. ['DNS:echo.test', 'IP:172.18.0.5']) with ca:
 * /tmp/tls/leaf.pem and /tmp/tls/leaf.key.
 */
export async function signLeaf(sbx, ca, sans) {
  await sbx.files.write('/tmp/tls/ca.pem', await readFile(ca.cert, 'utf8'))
  await sbx.files.write('/tmp/tls/ca.key', await readFile(ca.key, 'utf8'))
  await sbx.commands.run(`cd /tmp/tls && openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout leaf.key -out leaf.csr -subj /CN=leaf 2>&1 &&
    printf 'subjectAltName=${sans.join(',')}\\nextendedKeyUsage=serverAuth\\n' > ext &&
    openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem -days 1 -extfile ext 2>&1`)
}

/** Signs, on the host, a server certificate for sans with ca: leaf.pem and leaf.key in dir. */
export async function signLeafInDir(dir, ca, sans) {
  const run = (args) => promisify(execFile)('openssl', args, { cwd: dir })
  await writeFile(join(dir, 'ext'), `subjectAltName=${sans.join(',')}\nextendedKeyUsage=serverAuth\n`)
  await run(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=leaf'])
  await run(['x509', '-req', '-in', 'leaf.csr', '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', 'leaf.pem', '-days', '1', '-extfile', 'ext'])
}
