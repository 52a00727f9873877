import { spawnSync } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { crc32c } from '../../storage/index.js'
import { NonceStore } from '../../pipeline/ingest/embedded/nonce-store.js'
import { SignalDedup } from '../../pipeline/ingest/embedded/signal-dedup.js'
import { readStateSnapshot, SnapshotError, writeStateSnapshot, type IngestStateToSave } from '../../pipeline/ingest/embedded/state-snapshot.js'

const MIN = 60_000
const WINDOW = 30 * MIN
const NONCE_WINDOW = 10 * MIN
// The index keeps the first 128 bits of a body's hash: bodies differ there.
const hex = (n: number) => n.toString(16).padStart(8, '0').padEnd(64, '0')

async function tempFile(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-snapshot-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return join(dir, 'ingest-state.bin')
}

/** Stores holding `n` signals over three sources (every tenth with its own Idempotency-Key) and their nonces. */
function filledStores(n: number, acceptedAt: (i: number) => number) {
  const dedup = new SignalDedup({ windowMs: WINDOW, maxEntries: 10 * n, initialCapacity: 64 })
  const nonces = new NonceStore({ windowMs: NONCE_WINDOW, maxEntries: 10 * n, initialCapacity: 64 })
  for (let i = 0; i < n; i++) {
    const source = `src_${i % 3}`
    dedup.remember(source, i % 10 === 0 ? `idem-${i}` : undefined, { bodySha256: hex(i), signalId: `sig-${i}`, receivedAtMs: 1_000_000 + i, test: i % 7 === 0 }, acceptedAt(i))
    nonces.restore(source, `key_${i % 2}`, `nonce-${i}`, acceptedAt(i), acceptedAt(i))
  }
  return { dedup, nonces }
}

function snapshotOf(stores: ReturnType<typeof filledStores>, now: number): IngestStateToSave {
  return {
    writtenAt: now,
    dedupWindowMs: WINDOW,
    nonceWindowMs: NONCE_WINDOW,
    log: { seq: 42, time: now - 5, dedupId: 'src_0/sig-41' },
    dedup: stores.dedup.snapshot(now),
    nonces: stores.nonces.snapshot(now),
  }
}

t.test('a snapshot written and read back restores every live entry: replays, conflicts, Idempotency-Keys and nonces answer as before', async (t) => {
  const file = await tempFile(t)
  const now = 100 * MIN
  const n = 5000
  // Entries spread over 40 minutes: the oldest quarter has left the dedup window, most nonces their window.
  const before = filledStores(n, (i) => now - 40 * MIN + Math.floor((i * 40 * MIN) / n))
  const bytes = await writeStateSnapshot(file, snapshotOf(before, now))
  t.equal((await stat(file)).size, bytes)
  t.equal((await stat(file)).mode & 0o777, 0o600, 'readable by the gateway alone: it holds the hash keys')

  const read = await readStateSnapshot(file)
  t.ok(read)
  t.same(read!.log, { seq: 42, time: now - 5, dedupId: 'src_0/sig-41' })
  const dedup = new SignalDedup({ windowMs: WINDOW, maxEntries: 10 * n })
  const nonces = new NonceStore({ windowMs: NONCE_WINDOW, maxEntries: 10 * n })
  await dedup.restoreSnapshot(read!.dedup, now)
  await nonces.restoreSnapshot(read!.nonces, now)
  before.dedup.sweep(now)
  before.nonces.sweep(now)
  t.equal(dedup.size, before.dedup.size, 'the live dedup entries, no more')
  t.equal(nonces.size, before.nonces.size, 'the live nonces, no more')
  t.ok(dedup.size > 0 && dedup.size < n * 1.1, `${dedup.size} live dedup entries`)

  for (let i = 0; i < n; i += 97) {
    const source = `src_${i % 3}`
    const expected = before.dedup.lookup(source, `sig-${i}`, undefined, hex(i), now)
    t.same(dedup.lookup(source, `sig-${i}`, undefined, hex(i), now), expected, `signal ${i}: ${expected.kind}`)
    t.same(dedup.lookup(source, `sig-${i}`, undefined, hex(i + 1), now).kind, expected.kind === 'replay' ? 'conflict' : 'new', `signal ${i} with another body`)
    t.equal(nonces.claim(source, `key_${i % 2}`, `nonce-${i}`, now, 1e9), before.nonces.claim(source, `key_${i % 2}`, `nonce-${i}`, now, 1e9), `nonce ${i}`)
  }
  const idem = n - 10
  t.equal(dedup.lookup(`src_${idem % 3}`, 'another-signal', `idem-${idem}`, hex(1), now).kind, 'conflict', 'an Idempotency-Key of a live signal still conflicts')
  t.equal(dedup.lookup(`src_${idem % 3}`, `idem-${idem}`, undefined, hex(1), now).kind, 'conflict', 'and so does a signal_id equal to it')
  t.equal(dedup.lookup(`src_${(idem + 1) % 3}`, `sig-${idem}`, undefined, hex(idem), now).kind, 'new', 'entries stay within their own source')
  const fresh = dedup.lookup('src_1', 'new-signal', undefined, hex(1), now)
  t.equal(fresh.kind, 'new')
})

t.test('a restored store keeps counting room per source: the share of a source is the same as before the restart', async (t) => {
  const file = await tempFile(t)
  const dedup = new SignalDedup({ windowMs: WINDOW, maxEntries: 40 })
  for (let i = 0; i < 10; i++) dedup.remember('heavy', undefined, { bodySha256: hex(i), signalId: `s${i}`, receivedAtMs: 1, test: false }, 0)
  const nonces = new NonceStore({ windowMs: NONCE_WINDOW, maxEntries: 40 })
  await writeStateSnapshot(file, { writtenAt: 0, dedupWindowMs: WINDOW, nonceWindowMs: NONCE_WINDOW, log: null, dedup: dedup.snapshot(0), nonces: nonces.snapshot(0) })
  const restored = new SignalDedup({ windowMs: WINDOW, maxEntries: 40 })
  await restored.restoreSnapshot((await readStateSnapshot(file))!.dedup, 0)
  t.equal(restored.takeRoom('heavy', 'one-more', undefined, 0), 'source_full', 'a quarter of 40 is already held')
  t.type(restored.takeRoom('light', 'one', undefined, 0), 'function')
})

t.test('a missing snapshot reads as none; a damaged, cut or foreign one is a SnapshotError', async (t) => {
  const file = await tempFile(t)
  t.equal(await readStateSnapshot(file), undefined)
  const now = 10 * MIN
  await writeStateSnapshot(file, snapshotOf(filledStores(300, () => now), now))
  const good = await readFile(file)

  const flipped = Buffer.from(good)
  flipped[Math.floor(good.length / 2)]! ^= 1
  await writeFile(file, flipped)
  await t.rejects(readStateSnapshot(file), { name: 'SnapshotError', message: 'checksum mismatch' })

  await writeFile(file, good.subarray(0, good.length - 100))
  await t.rejects(readStateSnapshot(file), SnapshotError)

  await writeFile(file, Buffer.concat([Buffer.from('NOTSTATE'), good.subarray(8)]))
  await t.rejects(readStateSnapshot(file), { message: 'not an ingest state snapshot' })

  await writeFile(file, good)
  t.ok(await readStateSnapshot(file), 'the undamaged file reads')
})

t.test('a snapshot is restored only into an empty store, so it cannot mix with entries hashed under another key', async (t) => {
  const now = 0
  const file = await tempFile(t)
  await writeStateSnapshot(file, snapshotOf(filledStores(10, () => now), now))
  const stores = (await readStateSnapshot(file))!
  const dedup = new SignalDedup({ windowMs: WINDOW, maxEntries: 100 })
  dedup.remember('s', undefined, { bodySha256: hex(1), signalId: 'x', receivedAtMs: 1, test: false }, now)
  await t.rejects(dedup.restoreSnapshot(stores.dedup, now))
  const nonces = new NonceStore({ windowMs: NONCE_WINDOW, maxEntries: 100 })
  nonces.claim('s', 'k', 'n', now, 100)
  await t.rejects(nonces.restoreSnapshot(stores.nonces, now))
})

t.test('a FIFO or a folder in place of the snapshot is refused at once, not waited on', async (t) => {
  const file = await tempFile(t)
  t.equal(spawnSync('mkfifo', ['-m', '600', file]).status, 0, 'mkfifo (coreutils)')
  await t.rejects(readStateSnapshot(file), { name: 'SnapshotError', message: 'not a regular file' })
  await rm(file)
  await mkdir(file)
  await t.rejects(readStateSnapshot(file))
})

/** The file with its checksum made right again: what a reader must check past the checksum. */
function resealed(file: Buffer): Buffer {
  const out = Buffer.from(file)
  out.writeUInt32LE(crc32c(out, 0, out.length - 4), out.length - 4)
  return out
}

t.test('a file whose checksum holds is still checked: the footer, every array bound and the header shape give a SnapshotError', async (t) => {
  const file = await tempFile(t)
  const now = 10 * MIN
  await writeStateSnapshot(file, snapshotOf(filledStores(300, () => now), now))
  const good = await readFile(file)
  const footer = good.length - 16
  const headerOffset = good.readUInt32LE(footer)
  const headerLength = good.readUInt32LE(footer + 4)
  const header = good.toString('utf8', headerOffset, headerOffset + headerLength)
  const withHeader = (json: string) => {
    const out = Buffer.from(good)
    out.write(json.padEnd(headerLength, ' '), headerOffset, 'utf8')
    return resealed(out)
  }
  const spoilt: Array<[string, Buffer, RegExp]> = [
    ['the footer points past the header', (() => { const b = Buffer.from(good); b.writeUInt32LE(headerOffset + 8, footer); return resealed(b) })(), /header is not where the footer says/],
    ['one array too many', (() => { const b = Buffer.from(good); b.writeUInt32LE(b.readUInt32LE(footer + 8) + 1, footer + 8); return resealed(b) })(), /array runs past the header/],
    ['an array longer than the file', (() => { const b = Buffer.from(good); b.writeUInt32LE(0x7fffffff, 12); return resealed(b) })(), /array runs past the header/],
    ['one array too few', (() => { const b = Buffer.from(good); b.writeUInt32LE(b.readUInt32LE(footer + 8) - 1, footer + 8); return resealed(b) })(), /bytes left after the last array/],
    ['a null header', withHeader('null'), /version undefined/],
    ['tables that are not a list', withHeader('{"v":2,"tables":"x"}'), /header is not as expected/],
    ['a table of -1 parts', withHeader(header.replace('"parts":32', '"parts":-1')), /header is not as expected/],
    ['scopes that are not pairs', withHeader(header.replace(/\["src_\d","key_\d"\]/, '7')), /header is not as expected/],
  ]
  t.ok(header.includes('"parts":32') && /\["src_\d","key_\d"\]/.test(header), 'the header has what the cases change')
  for (const [why, bytes, message] of spoilt) {
    await writeFile(file, bytes)
    await t.rejects(readStateSnapshot(file), { name: 'SnapshotError', message }, why)
  }
})

t.test('a source first seen while the state is being written is named in it: the file reads back and restores', async (t) => {
  const file = await tempFile(t)
  const now = 10 * MIN
  const stores = filledStores(2000, () => now)
  const writing = writeStateSnapshot(file, snapshotOf(stores, now))
  // While the writer lets the event loop run between arrays, a new source's signals land in every shard.
  let added = 0
  const addSome = () => {
    for (let i = 0; i < 64; i++, added++) {
      stores.dedup.remember('src_new', undefined, { bodySha256: hex(90_000 + added), signalId: `late-${added}`, receivedAtMs: now, test: false }, now)
      stores.nonces.restore('src_new', 'key_new', `late-${added}`, now, now)
    }
  }
  const adding = setInterval(addSome, 0)
  await writing
  clearInterval(adding)
  t.ok(added > 0, `${added} signals of a new source came in while it was written`)
  const read = (await readStateSnapshot(file))!
  t.ok(read.dedup.sources.includes('src_new'), 'the new source is named')
  const dedup = new SignalDedup({ windowMs: WINDOW, maxEntries: 100_000 })
  const nonces = new NonceStore({ windowMs: NONCE_WINDOW, maxEntries: 100_000 })
  await dedup.restoreSnapshot(read.dedup, now)
  await nonces.restoreSnapshot(read.nonces, now)
  t.ok(dedup.size >= 2000 + 200 && dedup.size <= 2000 + 200 + added, `${dedup.size} entries: all before, some of those added while writing`)
})

t.test('a nonce snapshot taken with freed scope numbers restores each live nonce under its own scope, and frees the rest', async (t) => {
  const file = await tempFile(t)
  const nonces = new NonceStore({ windowMs: NONCE_WINDOW, maxEntries: 1000 })
  for (let k = 0; k < 6; k++) nonces.claim('src', `key-${k}`, `nonce-${k}`, k < 3 ? 0 : 5 * MIN, 1000)
  nonces.sweep(NONCE_WINDOW + 1)
  t.equal(nonces.scopes, 3, 'the first three keys freed their numbers')
  nonces.claim('src', 'key-late', 'nonce-late', NONCE_WINDOW + 1, 1000)
  const now = NONCE_WINDOW + 2
  const dedup = new SignalDedup({ windowMs: WINDOW, maxEntries: 10 })
  await writeStateSnapshot(file, { writtenAt: now, dedupWindowMs: WINDOW, nonceWindowMs: NONCE_WINDOW, log: null, dedup: dedup.snapshot(now), nonces: nonces.snapshot(now) })
  const read = await readStateSnapshot(file)
  const restored = new NonceStore({ windowMs: NONCE_WINDOW, maxEntries: 1000 })
  await restored.restoreSnapshot(read!.nonces, now)
  t.equal(restored.size, 4)
  t.equal(restored.scopes, 4, 'the placeholders of freed numbers are freed again')
  for (const k of ['key-3', 'key-4', 'key-5']) t.equal(restored.claim('src', k, `nonce-${k.slice(4)}`, now, 1000), 'replayed', k)
  t.equal(restored.claim('src', 'key-late', 'nonce-late', now, 1000), 'replayed')
  t.equal(restored.claim('src', 'key-0', 'nonce-0', now, 1000), 'claimed', 'an expired one is gone')
})
