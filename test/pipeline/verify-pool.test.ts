import { generateKeyPairSync, sign } from 'node:crypto'
import t from 'tap'
import { VerifyPool } from '../../pipeline/index.js'

const { privateKey, publicKey } = generateKeyPairSync('ed25519')
const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)

t.test('the pool verifies valid signatures and refuses altered ones, across batches', async (t) => {
  const pool = new VerifyPool({ threads: 2, batchSize: 8, queueLimit: 1000, maxWaitMs: 60_000, onError: (err) => t.fail(String(err)) })
  t.teardown(() => pool.close())
  const items = Array.from({ length: 100 }, (_, i) => {
    const message = Buffer.from(`POST\n/p\n2026-01-01T00:00:00Z\nn${i}\nabc`)
    const signature = sign(null, message, privateKey)
    if (i % 3 === 0) signature[5]! ^= 1
    return { message, signature, valid: i % 3 !== 0 }
  })
  const results = await Promise.all(items.map((it) => pool.reserve('s') && pool.verify({ publicKey: raw, message: it.message, signature: it.signature }, 's')))
  t.same(results, items.map((it) => it.valid))
  t.equal(pool.pending, 0)
})

t.test('reserve refuses at the queue limit, counting reserved slots, and succeeds again once answered or released', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 4, queueLimit: 10, maxWaitMs: 60_000, onError: (err) => t.fail(String(err)) })
  t.teardown(() => pool.close())
  const message = Buffer.from('m')
  const signature = sign(null, message, privateKey)
  // One source each: a source alone would stop at its share.
  const all = Array.from({ length: 9 }, (_, i) => pool.reserve(`s${i}`) && pool.verify({ publicKey: raw, message, signature }, `s${i}`))
  t.equal(pool.reserve('s9'), true, 'the tenth slot, reserved and not yet spent on verify')
  t.equal(pool.reserve('s10'), false, 'no eleventh')
  t.equal(pool.hasRoom(), false, 'no room for anyone')
  pool.release('s9')
  t.equal(pool.reserve('s10'), true, 'a released slot is free again')
  pool.release('s10')
  await Promise.all(all)
  t.equal(pool.pending, 0)
})

t.test('close finishes queued work and is safe to call twice', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 4, queueLimit: 10, maxWaitMs: 60_000, onError: (err) => t.fail(String(err)) })
  const message = Buffer.from('m')
  pool.reserve('s')
  const pending = pool.verify({ publicKey: raw, message, signature: sign(null, message, privateKey) }, 's')
  // A slot taken just before the close, spent just after it: the verify is refused and the slot is returned.
  pool.reserve('s')
  await Promise.all([pool.close(), pool.close()])
  t.equal(await pending, true)
  t.equal(pool.reserve('s'), false, 'a closed pool takes no work')
  await t.rejects(pool.verify({ publicKey: raw, message, signature: Buffer.alloc(64) }, 's'), { code: 'pool_closed' })
  t.equal(pool.pending, 0, 'no slot is left counted')
})

t.test('new work is refused once the oldest queued request has waited longer than maxWaitMs, though slots are free', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 1, queueLimit: 100_000, maxWaitMs: 2, onError: (err) => t.fail(String(err)) })
  t.teardown(() => pool.close())
  const message = Buffer.from('m')
  const signature = sign(null, message, privateKey)
  const all = Array.from({ length: 2000 }, () => pool.reserve('s') && pool.verify({ publicKey: raw, message, signature }, 's'))
  await new Promise((r) => setTimeout(r, 10))
  t.ok(pool.pending < 100_000 && pool.pending > 0, `${pool.pending} still queued`)
  t.equal(pool.hasRoom(), false, 'the queue is too old to join')
  t.equal(pool.reserve('s2'), false)
  await Promise.all(all)
  t.equal(pool.hasRoom(), true, 'room again once it drained')
})

t.test('a key or signature of the wrong length is refused, never cut to fit the batch', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 4, queueLimit: 10, maxWaitMs: 60_000, onError: (err) => t.fail(String(err)) })
  t.teardown(() => pool.close())
  const message = Buffer.from('m')
  const signature = sign(null, message, privateKey)
  pool.reserve('s')
  t.equal(await pool.verify({ publicKey: raw, message, signature: Buffer.concat([signature, Buffer.from([0])]) }, 's'), false, 'valid signature plus a byte')
  pool.reserve('s')
  t.equal(await pool.verify({ publicKey: Buffer.concat([raw, Buffer.from([0])]), message, signature }, 's'), false, 'a 33-byte key')
  t.equal(pool.pending, 0)
})

t.test('a source holds at most a quarter of the slots, and the last eighth only while it holds little, so its flood leaves room for the others', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 4, queueLimit: 64, maxWaitMs: 60_000, onError: (err) => t.fail(String(err)) })
  t.teardown(() => pool.close())
  const message = Buffer.from('m')
  const bad = Buffer.alloc(64)
  let flood = 0
  while (pool.reserve('flood')) flood++
  t.equal(flood, 16, 'the flooding source stops at its quarter of 64')
  t.equal(pool.hasRoom('flood'), false)
  t.equal(pool.hasRoom(), true, 'the pool still has room for others')
  let second = 0
  while (pool.reserve('second')) second++
  let third = 0
  while (pool.reserve('third')) third++
  t.same([second, third], [16, 16], 'two more sources take their quarters')
  let fourth = 0
  while (pool.reserve('fourth')) fourth++
  t.equal(fourth, 8, 'the fourth stops where the last eighth begins')
  let light = 0
  while (pool.reserve('light')) light++
  t.equal(light, 2, 'a light source takes the last eighth, up to a thirty-second of the slots')
  t.equal(pool.pending, 58)
  pool.release('flood')
  t.equal(pool.reserve('flood'), false, 'a heavy source gets no slot from the last eighth')
  t.equal(pool.reserve('other'), true, 'a light one does')
  const verified = Array.from({ length: flood - 1 }, () => pool.verify({ publicKey: raw, message, signature: bad }, 'flood'))
  t.same(await Promise.all(verified), Array(flood - 1).fill(false), 'the flood fails verification and gives its slots back')
  for (const [holder, n] of [['second', second], ['third', third], ['fourth', fourth], ['light', light], ['other', 1]] as const) {
    for (let i = 0; i < n; i++) pool.release(holder)
  }
  t.equal(pool.pending, 0, 'every slot given back')
  t.equal(pool.reserve('flood'), true, 'and the flooding source has room again')
  pool.release('flood')
})
