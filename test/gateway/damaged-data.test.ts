import { spawnSync } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import { existsSync } from 'node:fs'
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { sampleRegistryV1, writeRegistryV1 } from '../fixtures/registry-v1.js'
import { openJournal } from '../../pipeline/index.js'
import { payload, provision, push } from '../helpers/api.js'
import { GATEWAY_MAIN } from '../../harness/gateway-launcher.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/** sysexits.h EX_DATAERR; the systemd unit in deploy/ does not restart it. */
const EX_DATAERR = 65

type DataFolder = { readonly dataDir: string; readonly adminToken: string }

/** A start of the built service on `gw`'s data folder, run to its exit. */
function startOn(gw: DataFolder): { status: number | null; stderr: string } {
  const run = spawnSync(process.execPath, [GATEWAY_MAIN], {
    env: { PATH: process.env['PATH'], PORT: '0', HOST: '127.0.0.1', DATA_DIR: gw.dataDir, ADMIN_TOKEN: gw.adminToken },
    encoding: 'utf8',
    timeout: 30_000,
  })
  return { status: run.status, stderr: run.stderr }
}

/**
 * The data folder of a gateway that accepted a signal and was stopped: a registry bucket and a
 * journal. Made once, by a real run; each test damages a copy of its own, so the file starts
 * one gateway for all four instead of one each.
 */
const template = await (async () => {
  const gw = await startTestGateway(t)
  const src = await provision(gw)
  // Thrown, not asserted: the file's own test ends before the subtests below are queued.
  const pushed = await push(gw, src.sign(payload(src.sourceId)))
  if (pushed.status !== 202) throw new Error(`the signal that fills the journal was answered ${pushed.status}`)
  gw.proc.kill('SIGTERM')
  const exit = await gw.exited()
  if (exit.code !== 0) throw new Error(`the gateway stopped with ${JSON.stringify(exit)}, not code 0`)
  return gw
})()

const oldKey = () => generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32).toString('base64url')

/** A copy of the template's data folder, for one test to damage; removed when the test ends. */
async function stoppedGateway(t: Test): Promise<DataFolder> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sgw-damaged-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  await cp(template.dataDir, dataDir, { recursive: true })
  return { dataDir, adminToken: template.adminToken }
}

t.test('a damaged registry change with changes after it stops the start with EX_DATAERR and touches nothing', async (t) => {
  const gw = await stoppedGateway(t)
  // The registry files of a release that kept them in DATA_DIR, which a start copies into its bucket.
  const { snapshot, changes } = sampleRegistryV1([oldKey(), oldKey(), oldKey(), oldKey()], 'AAAAAAAAAAAAAAAAAAAAAA')
  await writeRegistryV1(gw.dataDir, snapshot, changes)
  const logPath = join(gw.dataDir, 'registry.log')
  const intact = await readFile(logPath)
  t.ok(intact.indexOf(10) < intact.length - 1, 'the log holds more than one change')
  const damaged = Buffer.from(intact)
  damaged[0] = 0x23 // '#': the first change is no longer JSON
  await writeFile(logPath, damaged)
  const run = startOn(gw)
  t.equal(run.status, EX_DATAERR, 'not restarted by the unit, unlike exit 1')
  t.match(run.stderr, `damaged data in DATA_DIR, not started (a restart would read the same bytes): ${logPath}: damaged change at byte 0, with changes after it`)
  t.notMatch(run.stderr, /\n\s+at /, 'a message, not a stack trace')
  t.same(await readFile(logPath), damaged, 'the damaged log is left as it was, for the operator')
  await writeFile(logPath, intact)
  const again = await startTestGateway(t, { dataDir: gw.dataDir, adminToken: gw.adminToken })
  t.ok(again.port > 0, 'with the file restored it starts again')
  t.ok(existsSync(`${logPath}.migrated`), 'and copies the registry files into its bucket, keeping them renamed')
})

t.test('a registry snapshot of an older release that is not JSON, of another version or without its lists stops the start with EX_DATAERR', async (t) => {
  const gw = await stoppedGateway(t)
  const path = join(gw.dataDir, 'registry.json')
  const cases: Array<[string, string]> = [
    ['{"version":1,"tokens":[', `${path} is not valid JSON`],
    ['null', `${path}: unknown registry version undefined`],
    ['{"version":2,"tokens":[],"agents":[],"sources":[],"keys":[]}', `${path}: unknown registry version 2`],
    ['{"version":1,"tokens":[],"agents":[],"keys":[]}', `${path} has no sources list`],
    ['{"version":1,"tokens":[null],"agents":[],"sources":[],"keys":[]}', 'holds a record that cannot be loaded'],
  ]
  for (const [content, problem] of cases) {
    await writeFile(path, content)
    const run = startOn(gw)
    t.equal(run.status, EX_DATAERR, content)
    t.match(run.stderr, problem, content)
  }
})

t.test('damaged journal consumer positions stop the start with EX_DATAERR, not a restart loop', async (t) => {
  const gw = await stoppedGateway(t)
  const path = join(gw.dataDir, 'journal', 'consumers.json')
  await writeFile(path, '{"version":')
  const run = startOn(gw)
  t.equal(run.status, EX_DATAERR)
  t.match(run.stderr, `damaged data in DATA_DIR, not started (a restart would read the same bytes): ${path} is not valid JSON`)
})

t.test('a sealed journal segment whose first record is damaged stops the start with EX_DATAERR, cutting nothing', async (t) => {
  const gw = await stoppedGateway(t)
  const dir = join(gw.dataDir, 'journal')
  // Small segments, so that the records below seal a few of them.
  const journal = await openJournal({ dir, fsync: 'always', segmentBytes: 2048, dedupWindowMs: 1000 })
  for (let i = 0; i < 20; i++) await journal.append(`filler-${i}`, Buffer.alloc(300, i))
  await journal.close()
  const segments = (await readdir(dir)).filter((n) => n.endsWith('.seg')).sort()
  t.ok(segments.length >= 3, `${segments.length} segments`)
  const sealed = join(dir, segments[1] as string)
  const bytes = await readFile(sealed)
  bytes.writeUInt8(bytes.readUInt8(20) ^ 0xff, 20)
  await writeFile(sealed, bytes)
  const run = startOn(gw)
  t.equal(run.status, EX_DATAERR)
  t.match(run.stderr, `damaged data in DATA_DIR, not started (a restart would read the same bytes): ${sealed}`)
  t.same(await readFile(sealed), bytes, 'the damaged segment is left as it was')
})
