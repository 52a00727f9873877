import { spawn, spawnSync } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { freePort, requireNatsServer } from '../../harness/nats-launcher.js'
import { repoPath } from '../helpers/repo-root.js'

/**
 * deploy/nats/: the three servers' files are valid for nats-server, form one JetStream
 * cluster when started as written (only the addresses and the store folder moved to
 * loopback and a throwaway folder), and every setting they hold is explained in the
 * README beside them.
 */

const NAMES = [1, 2, 3] as const
const files = await Promise.all(NAMES.map((i) => readFile(repoPath(`deploy/nats/nats-${i}.conf`), 'utf8')))
const readme = await readFile(repoPath('deploy/nats/README.md'), 'utf8')

/** `block.key` for every `key:` line, as the README's table names them. */
function settingsOf(text: string): string[] {
  const out: string[] = []
  let block = ''
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim()
    const open = /^([a-z_]+)\s*\{$/.exec(line)
    if (open) block = `${open[1]}.`
    else if (line === '}') block = ''
    else {
      const kv = /^([a-z_]+)\s*:/.exec(line)
      if (kv) out.push(`${block}${kv[1]}`)
    }
  }
  return out
}

t.test('every setting of the three files is explained in the README', async (t) => {
  const settings = new Set(files.flatMap(settingsOf))
  // The commented sync_interval is explained too: it is the 2.10 setting the files hold back.
  settings.add('jetstream.sync_interval')
  t.ok(settings.size >= 10, `found ${settings.size} settings`)
  for (const s of settings) t.ok(readme.includes(`| \`${s}\` |`), `README explains ${s}`)
})

t.test('the files differ only in the server name and the routes to the two others', async (t) => {
  NAMES.forEach((i, k) => {
    const text = files[k]!
    t.match(text, new RegExp(`^server_name: nats-${i}$`, 'm'))
    const routes = [...text.matchAll(/nats-route:\/\/nats-(\d):6222/g)].map((m) => Number(m[1]))
    t.same(routes.sort(), NAMES.filter((j) => j !== i), `nats-${i} routes to the other two`)
  })
  const strip = (s: string) => s.replace(/^server_name: .*$/m, '').replace(/nats-route:\/\/nats-\d:6222/g, '')
  t.equal(strip(files[0]!), strip(files[1]!))
  t.equal(strip(files[0]!), strip(files[2]!))
})

t.test('the three start as one JetStream cluster', async (t) => {
  requireNatsServer()
  const root = await mkdtemp(join(tmpdir(), 'sgw-deploy-nats-'))
  t.teardown(() => rm(root, { recursive: true, force: true }))
  const client: number[] = []
  const route: number[] = []
  for (const _ of NAMES) {
    client.push(await freePort())
    route.push(await freePort())
  }
  const confs = NAMES.map((i, k) =>
    files[k]!
      .replace('store_dir: "/var/lib/nats"', `store_dir: "${join(root, `s${i}`)}"`)
      .replace('0.0.0.0:4222', `127.0.0.1:${client[k]}`)
      .replace('0.0.0.0:6222', `127.0.0.1:${route[k]}`)
      .replace(/^http: .*$/m, '')
      .replace(/nats-route:\/\/nats-(\d):6222/g, (_, n: string) => `nats-route://127.0.0.1:${route[Number(n) - 1]}`),
  )
  for (const [k, text] of confs.entries()) {
    const file = join(root, `nats-${k + 1}.conf`)
    await writeFile(file, text)
    const check = spawnSync('nats-server', ['-t', '-c', file], { encoding: 'utf8' })
    t.equal(check.status, 0, `nats-${k + 1}.conf is valid: ${check.stderr}`)
  }
  const procs = confs.map((_, k) => spawn('nats-server', ['-c', join(root, `nats-${k + 1}.conf`)], { stdio: ['ignore', 'pipe', 'pipe'] }))
  t.teardown(() => {
    for (const p of procs) p.kill('SIGKILL')
  })
  // Each server logs the cluster's metadata leader once the three agree on one.
  const leaders = await Promise.all(
    procs.map(
      (p) =>
        new Promise<string>((resolve, reject) => {
          let seen = ''
          const timer = setTimeout(() => reject(new Error(`no metadata leader in 20 s:\n${seen.slice(-2000)}`)), 20_000)
          const onData = (chunk: Buffer) => {
            seen += chunk.toString('utf8')
            const m = /JetStream cluster new metadata leader: (nats-\d)\/sgw|(Self) is new JetStream cluster metadata leader/.exec(seen)
            if (m) {
              clearTimeout(timer)
              resolve(m[1] ?? 'self')
            }
          }
          p.stdout.on('data', onData)
          p.stderr.on('data', onData)
        }),
    ),
  )
  t.equal(leaders.length, 3, `every server saw a metadata leader (${leaders.join(', ')})`)
})
