import { generateKeyPairSync } from 'node:crypto'
import { appendFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { Registry } from '../../registry/index.js'
import { RegistryFile, snapshotPieces } from '../../registry/registry-file.js'
import { MANIFEST } from '../helpers/api.js'

const rawKey = () => generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)

async function folder(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-registry-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

async function populated(dir: string) {
  const registry = await Registry.open(new RegistryFile(dir), 'admin-secret')
  const agent = await registry.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 5 })
  const source = await registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } })
  const key = await registry.addKey(source.source_id, rawKey())
  await registry.markTested(source.source_id, key.key_id)
  await registry.promoteKey(source.source_id, key.key_id)
  await registry.flagSource(source.source_id)
  const { token } = await registry.createToken('creator', 'c1')
  return { registry, source, key, token }
}

t.test('each change is one appended line, and a reopen replays them all', async (t) => {
  const dir = await folder(t)
  const { source, key, token } = await populated(dir)
  const log = await readFile(join(dir, 'registry.log'), 'utf8')
  t.equal(log.split('\n').length - 1, 7, 'seven changes, seven lines')
  await t.rejects(stat(join(dir, 'registry.json')), { code: 'ENOENT' }, 'no snapshot written yet: the log is small')
  t.equal((await stat(join(dir, 'registry.log'))).mode & 0o777, 0o600, 'token hashes: owner only')
  const reopened = await Registry.open(new RegistryFile(dir), 'admin-secret')
  t.equal(reopened.key(source.source_id, key.key_id)?.record.state, 'active')
  t.type(reopened.source(source.source_id)?.flagged_for_review_at, 'string')
  t.match(reopened.authenticate(token), { role: 'creator', subject: 'c1' })
})

t.test('a torn last line was never acknowledged: it is cut off and the next change follows on a clean line', async (t) => {
  const dir = await folder(t)
  const { source, key } = await populated(dir)
  await appendFile(join(dir, 'registry.log'), '{"tokens":[],"agents":[{"agent_id":"ghost"')
  const reopened = await Registry.open(new RegistryFile(dir), 'admin-secret')
  t.equal(reopened.agent('ghost'), undefined)
  await reopened.revokeKey(source.source_id, key.key_id)
  const again = await Registry.open(new RegistryFile(dir), 'admin-secret')
  t.equal(again.key(source.source_id, key.key_id)?.record.state, 'revoked')
})

t.test('a damaged line with changes after it stops the start instead of dropping them', async (t) => {
  const dir = await folder(t)
  await populated(dir)
  const path = join(dir, 'registry.log')
  const lines = (await readFile(path, 'utf8')).split('\n')
  lines[2] = '{"broken'
  await writeFile(path, lines.join('\n'))
  await t.rejects(Registry.open(new RegistryFile(dir), 'admin-secret'), /registry\.log: damaged change/)
})

t.test('a snapshot with a record that cannot be loaded stops the open with RegistryError, whether or not a log follows it', async (t) => {
  const dir = await folder(t)
  await writeFile(join(dir, 'registry.json'), '{"version":1,"tokens":[null],"agents":[],"sources":[],"keys":[]}')
  await t.rejects(Registry.open(new RegistryFile(dir), 'admin-secret'), { name: 'RegistryError', code: 'registry_corrupt', message: /the registry holds a record that cannot be loaded/ })
  await writeFile(join(dir, 'registry.log'), '{"tokens":[],"agents":[],"sources":[],"keys":[],"droppedKeys":[]}\n')
  await t.rejects(Registry.open(new RegistryFile(dir), 'admin-secret'), { name: 'RegistryError', message: /registry\.log holds a record that cannot be loaded/ })
})

t.test('once the log outgrows the snapshot the state is folded into a new snapshot and the log starts over', async (t) => {
  const dir = await folder(t)
  const { registry, source } = await populated(dir)
  // About 330 bytes a key: 1,000 changes pass the 256 KB floor.
  const keys = []
  for (let i = 0; i < 1000; i++) {
    const key = await registry.addKey(source.source_id, rawKey())
    keys.push(key)
    await registry.revokeKey(source.source_id, key.key_id)
  }
  const snapshot = await stat(join(dir, 'registry.json'))
  const log = await stat(join(dir, 'registry.log'))
  t.ok(snapshot.size > 0, `a snapshot was written (${snapshot.size} bytes)`)
  t.ok(log.size < 256 * 1024, `the log started over (${log.size} bytes)`)
  const reopened = await Registry.open(new RegistryFile(dir), 'admin-secret')
  t.same(
    reopened.keysOf(source.source_id).map((k) => [k.key_id, k.state]),
    registry.keysOf(source.source_id).map((k) => [k.key_id, k.state]),
    'the same keys in the same states',
  )
  t.equal(reopened.key(source.source_id, keys[0]!.key_id), undefined, 'a revoked record dropped for room stays dropped')
  t.equal(reopened.key(source.source_id, keys[999]!.key_id)?.record.state, 'revoked')
  const saved = JSON.parse(await readFile(join(dir, 'registry.json'), 'utf8'))
  t.ok(saved.retired_keys.length > 0, `the snapshot holds the fingerprints of dropped keys (${saved.retired_keys.length})`)
  for (const i of [0, 500, 935]) {
    await t.rejects(reopened.addKey(source.source_id, Buffer.from(keys[i]!.public_key, 'base64url')), { code: 'key_exists' }, `dropped key ${i} stays refused`)
  }
})

t.test('a crash between a new snapshot and the emptied log replays none of the old lines over it', async (t) => {
  const dir = await folder(t)
  const { registry, source, key } = await populated(dir)
  const logPath = join(dir, 'registry.log')
  const size = async () => (await stat(logPath)).size
  const next = await registry.addKey(source.source_id, rawKey())
  await registry.markTested(source.source_id, next.key_id)
  // Fill the log to about 100 bytes short of the 256 KB at which a change compacts, so
  // that the promotion (two key records, about 700 bytes) is the change that does.
  const limit = 256 * 1024
  while (limit - (await size()) > 3000) await registry.revokeKey(source.source_id, (await registry.addKey(source.source_id, rawKey())).key_id)
  const s0 = await size()
  await registry.createToken('renter', 'x')
  const tokenLine = (await size()) - s0 - 1
  while (limit - (await size()) > tokenLine + 128 + 200) await registry.createToken('renter', 'y'.repeat(128))
  const pad = limit - (await size()) - tokenLine - 100
  if (pad >= 1) await registry.createToken('renter', 'z'.repeat(Math.min(128, pad)))
  const before = await readFile(logPath)
  await registry.promoteKey(source.source_id, next.key_id)
  t.ok((await size()) < before.length, 'the promotion compacted the registry')
  // What a kill -9 between the snapshot rename and the log truncation leaves: the new snapshot and the old log.
  await writeFile(logPath, before)
  const reopened = await Registry.open(new RegistryFile(dir), 'admin-secret')
  t.equal(reopened.key(source.source_id, next.key_id)?.record.state, 'active', 'the promotion holds')
  t.equal(reopened.key(source.source_id, key.key_id)?.record.state, 'grace', 'and so does the move of the old key to grace')
  const after = await reopened.addKey(source.source_id, rawKey())
  const again = await Registry.open(new RegistryFile(dir), 'admin-secret')
  t.ok(again.key(source.source_id, after.key_id), 'a change written after the stale lines is replayed')
  t.equal(again.key(source.source_id, next.key_id)?.record.state, 'active')
})

t.test('a snapshot is written in pieces, with turns of the event loop between, that make the same JSON', async (t) => {
  const at = '2026-01-01T00:00:00.000Z'
  const doc = {
    version: 1 as const,
    generation: 7,
    tokens: Array.from({ length: 2500 }, (_, i) => ({ token_id: `tok_${i}`, sha256: 'ab'.repeat(32), role: 'creator' as const, subject: `c${i}`, created_at: at, revoked_at: null })),
    agents: [{ agent_id: 'a1', creator_id: 'c1', slots: 2, created_at: at }],
    sources: [],
    keys: [],
    retired_keys: [{ source_id: 's1', fingerprint: 'f"\\u2028' }],
    disputes: [
      {
        dispute_id: 'dsp_1',
        source_id: 's1',
        creator_id: 'c1',
        key_id: 'k1',
        signals: [{ signal_id: 'sig_00000001', received_at: at, seq: 1 }],
        evidence: 'leaked',
        state: 'accepted' as const,
        opened_by: 'c1',
        created_at: at,
        resolved_at: at,
        resolution: null,
      },
    ],
  }
  let turns = 0
  let counting = true
  const tick = () => {
    turns++
    if (counting) setImmediate(tick)
  }
  setImmediate(tick)
  const pieces: Buffer[] = []
  for await (const piece of snapshotPieces(doc)) pieces.push(piece)
  counting = false
  const text = Buffer.concat(pieces).toString('utf8')
  t.equal(text, JSON.stringify(doc), 'byte for byte what JSON.stringify makes')
  t.same(JSON.parse(text), doc)
  t.ok(turns >= 3, `the event loop ran between the 1,000-record pieces (${turns} turns)`)
  const empty = { version: 1 as const, tokens: [], agents: [], sources: [], keys: [] }
  const emptyPieces: Buffer[] = []
  for await (const piece of snapshotPieces(empty)) emptyPieces.push(piece)
  t.same(JSON.parse(Buffer.concat(emptyPieces).toString()), { ...empty, retired_keys: [], disputes: [] }, 'empty lists')
})
