import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import t from 'tap'
import { GATEWAY_MAIN } from '../../harness/gateway-launcher.js'
import { repoPath } from '../helpers/repo-root.js'

/** `npm run cluster` (the built dist/harness/local-cluster.js): it starts, says where, serves each role, and Ctrl-C stops and cleans up everything. */

const SCRIPT = repoPath('dist/harness/local-cluster.js')

t.test('npm run cluster starts nats-server and four processes, prints where, and Ctrl-C stops them all and deletes their folders', async (t) => {
  t.ok(existsSync(GATEWAY_MAIN), 'the service is built (npm test builds it first)')
  const proc = spawn(process.execPath, [SCRIPT], { stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => void proc.kill('SIGKILL'))
  let out = ''
  proc.stdout.setEncoding('utf8').on('data', (c: string) => (out += c))
  proc.stderr.setEncoding('utf8').on('data', (c: string) => (out += c))
  const exited = new Promise<number | null>((resolve) => proc.once('close', resolve))
  for (let i = 0; i < 600 && !out.includes('Ctrl-C stops'); i++) await new Promise((r) => setTimeout(r, 100))
  t.match(out, /^nats-server {5}nats:\/\/127\.0\.0\.1:\d+$/m, 'the NATS address')
  const processes = [...out.matchAll(/^(gateway 1|gateway 2|recorder|delivery) +(http:\/\/127\.0\.0\.1:\d+) +\(pid \d+, DATA_DIR (\S+)\)$/gm)].map((m) => ({ name: m[1]!, url: m[2]!, dataDir: m[3]! }))
  t.same(processes.map((p) => p.name), ['gateway 1', 'gateway 2', 'recorder', 'delivery'])
  const token = /^ADMIN_TOKEN +(\S+)$/m.exec(out)?.[1]
  t.ok(token !== undefined && token.length >= 32, 'a generated admin token')
  for (const p of processes) {
    const ready = await fetch(`${p.url}/readyz`)
    t.equal(ready.status, 200, `${p.name} is ready`)
    t.equal(((await ready.json()) as { data: { role: string } }).data.role, p.name.split(' ')[0], `${p.name} runs its role`)
  }
  const tokens = await fetch(`${processes[1]!.url}/v1/admin/tokens`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(tokens.status, 200, 'the admin token works on a gateway')
  const misrouted = await fetch(`${processes[0]!.url}/v1/usage`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(misrouted.status, 421, 'a receipt route on a gateway names the recorder')

  proc.kill('SIGINT')
  t.equal(await exited, 0, 'Ctrl-C ends it with 0')
  t.equal(out.match(/: code 0 after SIGTERM/g)?.length, 4, 'every process stopped cleanly')
  t.same(processes.filter((p) => existsSync(p.dataDir)).map((p) => p.name), [], 'their data folders are deleted')
})
