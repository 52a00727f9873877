import t from 'tap'
import { nonceCap } from '../../pipeline/ingest/ingest-pipeline.js'
import { NonceStore } from '../../pipeline/ingest/embedded/nonce-store.js'
import { SharedRoom } from '../../pipeline/shared-room.js'
import { SignalDedup } from '../../pipeline/ingest/embedded/signal-dedup.js'

const MIN = 60_000
const H1 = 'a'.repeat(64)
const H2 = 'b'.repeat(64)
const H3 = 'c'.repeat(64)

t.test('a nonce is refused within 10 minutes of its claim, counted inclusively, and free again after', async (t) => {
  const nonces = new NonceStore({ windowMs: 10 * MIN, maxEntries: 100 })
  t.equal(nonces.claim('src', 'key', 'n1', 0, 100), 'claimed')
  t.equal(nonces.claim('src', 'key', 'n1', 10 * MIN - 1, 100), 'replayed')
  t.equal(nonces.claim('src', 'key', 'n1', 10 * MIN, 100), 'replayed', 'the boundary itself is inside the window')
  t.equal(nonces.claim('src', 'key', 'n1', 10 * MIN + 1, 100), 'claimed')
})

t.test('nonces are scoped to source and key', async (t) => {
  const nonces = new NonceStore({ windowMs: 10 * MIN, maxEntries: 100 })
  t.equal(nonces.claim('src', 'key', 'n', 0, 100), 'claimed')
  t.equal(nonces.claim('src', 'key2', 'n', 0, 100), 'claimed')
  t.equal(nonces.claim('src2', 'key', 'n', 0, 100), 'claimed')
})

t.test('one source cannot hold more than its cap of live nonces, over all its keys; other sources are unaffected', async (t) => {
  const nonces = new NonceStore({ windowMs: 10 * MIN, maxEntries: 1000 })
  for (let i = 0; i < 5; i++) t.equal(nonces.claim('s', `k${i % 2}`, `n${i}`, i, 5), 'claimed')
  t.equal(nonces.claim('s', 'k0', 'n5', 5, 5), 'source_full')
  t.equal(nonces.claim('s', 'another-key', 'n5', 5, 5), 'source_full', 'a new key of the same source adds no room')
  t.equal(nonces.claim('s2', 'k0', 'n5', 5, 5), 'claimed')
  t.equal(nonces.claim('s', 'k0', 'n6', 10 * MIN + 10, 5), 'claimed', 'room again once old nonces expire')
})

t.test('the store refuses claims past its global bound', async (t) => {
  const nonces = new NonceStore({ windowMs: 10 * MIN, maxEntries: 3 })
  for (let i = 0; i < 3; i++) nonces.claim(`s${i}`, 'k', 'n', 0, 100)
  t.equal(nonces.claim('s9', 'k', 'n', 1, 100), 'store_full')
  t.equal(nonces.size, 3)
})

t.test('expired nonces are dropped, so memory follows the window', async (t) => {
  const nonces = new NonceStore({ windowMs: 1000, maxEntries: 1000 })
  for (let i = 0; i < 500; i++) nonces.claim('s', 'k', `n${i}`, i, 1000)
  nonces.sweep(5000)
  t.equal(nonces.size, 0)
  t.equal(nonces.claim('s', 'k', 'fresh', 5000, 1), 'claimed', 'the per-key count went back to zero')
})

t.test('a restored nonce from before a restart still refuses a replay', async (t) => {
  const nonces = new NonceStore({ windowMs: 10 * MIN, maxEntries: 100 })
  nonces.restore('s', 'k', 'n', 1000, 2000)
  t.equal(nonces.claim('s', 'k', 'n', 3000, 100), 'replayed')
  nonces.restore('s', 'k', 'old', 0, 11 * MIN)
  t.equal(nonces.claim('s', 'k', 'old', 11 * MIN, 100), 'claimed', 'an expired one is not restored')
})

t.test('dedup: the same body is a replay, another body a conflict, and both are forgotten after the window', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 100_000 })
  t.equal(dedup.lookup('s', 'sig1', undefined, H1, 0).kind, 'new')
  dedup.remember('s', 'idem1', { bodySha256: H1, signalId: 'sig1', receivedAtMs: 5, test: false }, 0)
  const replay = dedup.lookup('s', 'sig1', undefined, H1, 1)
  t.equal(replay.kind, 'replay')
  t.equal(replay.kind === 'replay' && replay.record.receivedAtMs, 5, 'the original arrival time')
  t.equal(dedup.lookup('s', 'sig1', undefined, H2, 1).kind, 'conflict')
  t.equal(dedup.lookup('s', 'sig2', 'idem1', H3, 1).kind, 'conflict', 'an Idempotency-Key reused by another signal')
  t.equal(dedup.lookup('other', 'sig1', undefined, H2, 1).kind, 'new', 'scoped per source')
  t.equal(dedup.lookup('s', 'sig1', undefined, H2, 20 * MIN + 1).kind, 'new')
})

t.test('dedup: an Idempotency-Key equal to another signal_id conflicts with that signal', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 100_000 })
  dedup.remember('s', 'sig-A', { bodySha256: H1, signalId: 'sig-A', receivedAtMs: 1, test: false }, 0)
  t.equal(dedup.lookup('s', 'sig-B', 'sig-A', H2, 1).kind, 'conflict')
  t.equal(dedup.lookup('s', 'sig-A', 'sig-A', H1, 1).kind, 'replay')
})

t.test("dedup: a signal_id already used as another signal's Idempotency-Key conflicts with that signal", async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 100_000 })
  dedup.remember('s', 'key-K', { bodySha256: H1, signalId: 'sig-A', receivedAtMs: 1, test: false }, 0)
  t.equal(dedup.lookup('s', 'key-K', undefined, H2, 1).kind, 'conflict', 'without a key header')
  t.equal(dedup.lookup('s', 'key-K', 'key-K', H2, 1).kind, 'conflict', 'with the key equal to the signal_id')
  t.equal(dedup.lookup('s', 'key-K', 'key-K', H1, 1).kind, 'conflict', 'the same bytes under another signal_id are another signal')
  t.equal(dedup.lookup('s', 'sig-A', 'key-K', H1, 1).kind, 'replay', 'the original retry is still a replay')
  t.equal(dedup.lookup('other', 'key-K', undefined, H2, 1).kind, 'new', 'scoped per source')
})

t.test('dedup: a signal in flight blocks a request whose signal_id is its Idempotency-Key', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 100_000 })
  const release = dedup.reserve('s', 'sig-A', 'key-K')
  t.equal(dedup.lookup('s', 'key-K', undefined, H1, 0).kind, 'in_flight')
  release()
  t.equal(dedup.lookup('s', 'key-K', undefined, H1, 0).kind, 'new')
})

t.test('dedup: a concurrent duplicate sees the reservation and waits for it', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 100_000 })
  const release = dedup.reserve('s', 'sig1', 'idem')
  const seen = dedup.lookup('s', 'sig1', undefined, H1, 0)
  t.equal(seen.kind, 'in_flight')
  t.equal(dedup.lookup('s', 'other', 'idem', H1, 0).kind, 'in_flight', 'also by Idempotency-Key')
  release()
  if (seen.kind === 'in_flight') await seen.settled
  t.equal(dedup.lookup('s', 'sig1', undefined, H1, 0).kind, 'new', 'a failed first attempt leaves nothing behind')
})

t.test('a source within its max_rate never meets its nonce cap', async (t) => {
  const window = 10 * MIN
  t.equal(nonceCap({ rate: 1, per: 'hour' }, window), 1000, 'never fewer than 1,000')
  t.ok(nonceCap({ rate: 100, per: 'second', burst: 500 }, window) >= 100 * 600 + 500)
  t.ok(nonceCap({ rate: 600, per: 'minute' }, window) >= 10 * 600)
})

t.test('dedup: a replay that carries an Idempotency-Key already used by another signal conflicts', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 100_000 })
  dedup.remember('s', 'key-C', { bodySha256: H1, signalId: 'sig-C', receivedAtMs: 1, test: false }, 0)
  dedup.remember('s', undefined, { bodySha256: H2, signalId: 'sig-A', receivedAtMs: 2, test: false }, 0)
  t.equal(dedup.lookup('s', 'sig-A', undefined, H2, 1).kind, 'replay')
  t.equal(dedup.lookup('s', 'sig-A', 'key-C', H2, 1).kind, 'conflict')
})

t.test('dedup: a signal in flight blocks a request whose Idempotency-Key is its signal_id', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 100_000 })
  const release = dedup.reserve('s', 'sig-A', undefined)
  t.equal(dedup.lookup('s', 'sig-B', 'sig-A', H1, 0).kind, 'in_flight')
  release()
})

t.test('dedup: ids of one source never match another source, whatever their hashes', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 100_000 })
  for (let i = 0; i < 2000; i++) dedup.remember(`src-${i % 50}`, undefined, { bodySha256: H1, signalId: `sig-${i}`, receivedAtMs: i, test: false }, 0)
  let crossMatches = 0
  for (let i = 0; i < 2000; i++) if (dedup.lookup(`src-${(i % 50) + 1}`, `sig-${i}`, undefined, H1, 1).kind !== 'new') crossMatches++
  t.equal(crossMatches, 0)
  t.equal(dedup.lookup('src-7', 'sig-7', undefined, H1, 1).kind, 'replay')
})

t.test('nonce store: one source holds at most its share of the store, over all its keys, whatever its own cap', async (t) => {
  const nonces = new NonceStore({ windowMs: 10 * MIN, maxEntries: 100 })
  // Spread over as many keys as a source may register, pending ones included.
  for (let i = 0; i < 25; i++) t.equal(nonces.claim('s', `k${i % 32}`, `n${i}`, 0, 1_000_000), 'claimed')
  t.equal(nonces.claim('s', 'k25', 'n25', 0, 1_000_000), 'source_full')
  t.equal(nonces.claim('other', 'k', 'n25', 0, 1_000_000), 'claimed')
})

t.test('shared room: a holder stops at its share or its own cap, everyone at the store bound, and removals give room back', async (t) => {
  const room = new SharedRoom({ max: 80, maxPerHolderShare: 0.25 })
  for (let i = 0; i < 20; i++) room.added(1)
  t.equal(room.room(1, 1), 'holder_full', 'a quarter of 80')
  t.equal(room.room(2, 1, 0), 'holder_full', 'a cap of its own below the share')
  t.equal(room.room(2, 20), 'ok')
  t.equal(room.room(2, 21), 'holder_full')
  room.removed(1)
  t.equal(room.room(1, 1), 'ok')
  t.equal(room.held(1), 19)
  t.equal(room.total, 19)
})

t.test('shared room: in the last eighth only light holders (under a thirty-second) get in, so heavy sources cannot shut out light ones', async (t) => {
  const room = new SharedRoom({ max: 320, maxPerHolderShare: 0.25 })
  // The reserve is the last eighth: past 280 of 320; light means at most 10.
  for (let h = 1; h <= 3; h++) for (let i = 0; i < 80; i++) room.added(h)
  for (let i = 0; i < 40; i++) room.added(4)
  t.equal(room.total, 280)
  t.equal(room.room(4, 1), 'store_full', 'a heavy holder below its share is refused in the reserve')
  t.equal(room.room(5, 10), 'ok', 'a light one gets in up to a thirty-second')
  t.equal(room.room(5, 11), 'store_full')
  for (let h = 5; h <= 8; h++) for (let i = 0; i < 10; i++) room.added(h)
  t.equal(room.room(9, 1), 'store_full', 'at the store bound nobody gets in')
  room.removed(5)
  t.equal(room.room(9, 1), 'ok', 'an expired entry gives the room back')
  t.equal(room.room(1, 1), 'holder_full', 'a holder at its share is told so first')
})

t.test('nonce store: four sources at their full share leave the last eighth to light sources', async (t) => {
  const nonces = new NonceStore({ windowMs: 10 * MIN, maxEntries: 320 })
  const answers = new Map<string, number>()
  for (let s = 0; s < 4; s++) {
    for (let i = 0; i < 80; i++) {
      const claim = nonces.claim(`heavy${s}`, 'k', `n${i}`, 0, 1000)
      answers.set(claim, (answers.get(claim) ?? 0) + 1)
    }
  }
  t.equal(nonces.size, 280, 'the heavy sources stop at seven eighths')
  t.same(Object.fromEntries(answers), { claimed: 280, store_full: 40 }, 'and are told the store is full')
  for (let s = 0; s < 4; s++) for (let i = 0; i < 10; i++) t.equal(nonces.claim(`light${s}`, 'k', `n${i}`, 0, 1000), 'claimed')
})

/** Asks the dedup index for room and gives it straight back. */
function roomOf(dedup: SignalDedup, source: string, signalId: string, key: string | undefined, now: number): string {
  const room = dedup.takeRoom(source, signalId, key, now)
  if (typeof room === 'string') return room
  room()
  return 'ok'
}

t.test('dedup: room taken for a signal under way counts until it is given back', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 8 })
  const first = dedup.takeRoom('a', 'sig-0', undefined, 0)
  const second = dedup.takeRoom('a', 'sig-1', undefined, 0)
  t.type(first, 'function')
  t.type(second, 'function')
  t.equal(dedup.takeRoom('a', 'sig-2', undefined, 0), 'source_full', 'two signals under way fill a share of 2')
  if (typeof first === 'function') first()
  t.equal(roomOf(dedup, 'a', 'sig-2', undefined, 0), 'ok')
})

t.test('dedup: the index has a bound in all and per source, counts a separate Idempotency-Key as a second entry, and frees room on expiry', async (t) => {
  const dedup = new SignalDedup({ windowMs: 20 * MIN, maxEntries: 64 })
  const remember = (source: string, id: string, key?: string) => dedup.remember(source, key, { bodySha256: H1, signalId: id, receivedAtMs: 0, test: false }, 0)
  for (let i = 0; i < 15; i++) remember('a', `sig-${i}`)
  t.equal(roomOf(dedup, 'a', 'sig-15', undefined, 1), 'ok', 'the last of a share of 16')
  t.equal(roomOf(dedup, 'a', 'sig-15', 'other-key', 1), 'source_full', 'a separate key needs a second entry')
  t.equal(roomOf(dedup, 'a', 'sig-15', 'sig-15', 1), 'ok', 'a key equal to the signal_id costs nothing')
  remember('a', 'sig-15')
  t.equal(roomOf(dedup, 'a', 'sig-16', undefined, 1), 'source_full')
  for (const s of ['b', 'c']) for (let i = 0; i < 16; i++) remember(s, `sig-${i}`)
  for (let i = 0; i < 4; i++) remember('d', `sig-${i}`, `key-${i}`)
  t.equal(dedup.size, 56, 'seven eighths')
  t.equal(roomOf(dedup, 'd', 'sig-4', undefined, 1), 'store_full', 'the reserve is for light sources')
  t.equal(roomOf(dedup, 'e', 'sig-0', 'key-0', 1), 'ok', 'a light source gets the reserve')
  for (const s of ['e', 'f', 'g', 'h']) for (let i = 0; i < 2; i++) remember(s, `sig-${i}`)
  t.equal(dedup.size, 64)
  t.equal(roomOf(dedup, 'i', 'sig-0', undefined, 1), 'store_full', 'full')
  t.equal(roomOf(dedup, 'a', 'sig-16', undefined, 20 * MIN + 1), 'ok', 'expired entries are dropped before refusing')
  t.equal(dedup.size, 0)
})

t.test('nonce store: a scope whose nonces all expired is freed and its number reused, so keys used once and revoked do not pile up', async (t) => {
  const nonces = new NonceStore({ windowMs: 1000, maxEntries: 100_000 })
  // A creator loops: register a key, sign one request, revoke it.
  for (let round = 0; round < 50; round++) {
    const now = round * 2000
    for (let k = 0; k < 100; k++) t.equal(nonces.claim('s', `key-${round}-${k}`, 'n', now, 1000), 'claimed')
    nonces.sweep(now + 1500)
  }
  t.equal(nonces.size, 0)
  t.equal(nonces.scopes, 0, 'no scope left once its nonces expired')
  // Scopes in use keep theirs, and a reused number never lets one scope see another's nonce.
  t.equal(nonces.claim('s', 'old', 'n', 200_000, 1000), 'claimed')
  nonces.sweep(201_500)
  t.equal(nonces.claim('s', 'new', 'n', 202_000, 1000), 'claimed', 'a new scope on the freed number starts empty')
  t.equal(nonces.claim('s', 'new', 'n', 202_001, 1000), 'replayed')
  t.equal(nonces.claim('s', 'kept', 'm', 202_000, 1000), 'claimed')
  t.equal(nonces.scopes, 2)
})

t.test('nonce store: a claim refused for room leaves no scope behind', async (t) => {
  const nonces = new NonceStore({ windowMs: 1000, maxEntries: 1 })
  t.equal(nonces.claim('s', 'k', 'n', 0, 10), 'claimed')
  for (let i = 0; i < 10; i++) t.equal(nonces.claim(`other-${i}`, 'k', 'n', 1, 10), 'store_full')
  t.equal(nonces.scopes, 1)
})
