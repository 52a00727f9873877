import { generateKeyPairSync } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { migrateLegacyRegistry } from '../../registry/index.js'
import { fingerprint } from '../../registry/retired-keys.js'
import { sampleRegistryV1, writeRegistryV1 } from '../fixtures/registry-v1.js'
import { openRegistry, registryBucket, storedEntries, type TapLike } from '../helpers/registry-bucket.js'

const rawKey = () => generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)

async function folder(t: TapLike) {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-registry-v1-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** A DATA_DIR as the file-registry releases left it, with the raw keys its records name. */
async function oldDataDir(t: TapLike, tail = '') {
  const dir = await folder(t)
  const raw = [rawKey(), rawKey(), rawKey(), rawKey()]
  const dropped = rawKey()
  const { snapshot, changes } = sampleRegistryV1(raw.map((k) => Buffer.from(k).toString('base64url')), fingerprint(dropped))
  // A line of the generation before the snapshot, left behind it by a crash: older than the snapshot, skipped.
  const stale = { ...changes[0]!, tokens: [{ token_id: 'tok_stale', sha256: 'cc'.repeat(32), role: 'renter', subject: 'x', created_at: '2025-01-01T00:00:00.000Z', revoked_at: null }], generation: 1 }
  await writeRegistryV1(dir, snapshot, [stale, ...changes], tail)
  return { dir, raw, dropped }
}

t.test('a data folder of the file registry is copied into the bucket once, every record as it was, and its files are renamed', async (t) => {
  const { dir, raw, dropped } = await oldDataDir(t, '{"tokens":[],"agents":[{"agent_id":"ghost"')
  const bucket = await registryBucket(t)
  t.equal(await migrateLegacyRegistry(dir, bucket), 6, 'two tokens, one agent, two sources (keys inside), one disputes entry')
  t.same((await readdir(dir)).sort(), ['registry.json.migrated', 'registry.log.migrated'], 'the old files are kept, renamed, never read again')
  const registry = await openRegistry(t, bucket)
  t.equal(registry.token('tok_stale'), undefined, 'a line older than the snapshot is skipped')
  t.type(registry.token('tok_old')?.revoked_at, 'string', 'the log replayed over the snapshot')
  t.same([...registry.tokens()].map((r) => r.token_id), ['tok_old', 'tok_new'], 'oldest first')
  t.equal(registry.agent('ghost'), undefined, 'a torn last line was never acknowledged')
  t.equal(registry.agent('agent.one:1')?.slots, 2, "an agent id with characters a key cannot hold")
  t.equal(registry.slotsUsed('agent.one:1'), 1, 'the retired source holds no slot')
  t.same(registry.sourcesOfAgent('agent.one:1').map((s) => [s.source_id, s.retired_at === null]), [['src_live', true], ['src_gone', false]])
  t.same(registry.keysOf('src_live').map((k) => [k.key_id, k.state]), [['key_grace', 'grace'], ['key_active', 'active'], ['key_revoked', 'revoked'], ['key_pending', 'pending']])
  await t.rejects(registry.addKey('src_live', dropped), { code: 'key_exists', message: /revoked/ }, "a dropped key's fingerprint still refuses it")
  await t.rejects(registry.addKey('src_live', raw[2]!), { code: 'key_exists' })
  t.match(registry.acceptedDisputesOf('src_live'), [{ dispute_id: 'dsp_1', after_seq: 7, accept_order: 0 }], 'a dispute accepted before its place was kept gets the derived one')
  t.equal(registry.disputeOf('src_live', 'sig_00000001'), 'dsp_1')

  // A second start finds no files: nothing is copied again, the bucket is as it was.
  const before = await storedEntries(bucket)
  t.equal(await migrateLegacyRegistry(dir, bucket), undefined)
  t.same(await storedEntries(bucket), before)
})

t.test('a copy stopped half-way (the files not yet renamed) is finished by the next start, changing nothing already copied', async (t) => {
  const { dir } = await oldDataDir(t)
  const bucket = await registryBucket(t)
  const registry = await openRegistry(t, bucket)
  // What the first start copied before it stopped: one entry, changed since by this release.
  await writeFile(join(dir, 'registry.json.keep'), await readFile(join(dir, 'registry.json')))
  await migrateLegacyRegistry(dir, bucket)
  await registry.setAgentSlots('agent.one:1', 5)
  const { rename } = await import('node:fs/promises')
  await rename(join(dir, 'registry.json.keep'), join(dir, 'registry.json'))
  t.equal(await migrateLegacyRegistry(dir, bucket), 5, 'the snapshot alone makes five entries')
  t.equal((await openRegistry(t, bucket)).agent('agent.one:1')?.slots, 5, 'an entry already in the bucket is left as it is')
})

t.test('damaged registry files stop the start with RegistryError and are left as they were', async (t) => {
  const { dir } = await oldDataDir(t)
  const bucket = await registryBucket(t)
  const logPath = join(dir, 'registry.log')
  const intact = await readFile(logPath)
  const damaged = Buffer.from(intact)
  damaged[0] = 0x23
  await writeFile(logPath, damaged)
  await t.rejects(migrateLegacyRegistry(dir, bucket), { name: 'RegistryError', code: 'registry_corrupt', message: /registry\.log: damaged change at byte 0, with changes after it/ })
  t.same(await readFile(logPath), damaged, 'untouched')
  t.equal((await storedEntries(bucket)).size, 0, 'nothing copied')
  await writeFile(join(dir, 'registry.json'), '{"version":1,"tokens":[null],"agents":[],"sources":[],"keys":[]}')
  await writeFile(logPath, '')
  await t.rejects(migrateLegacyRegistry(dir, bucket), { name: 'RegistryError', code: 'registry_corrupt', message: /holds a record that cannot be loaded/ })
})
