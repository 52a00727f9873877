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
  const results = await Promise.all(items.map((it) => pool.reserve() && pool.verify({ publicKey: raw, message: it.message, signature: it.signature })))
  t.same(results, items.map((it) => it.valid))
  t.equal(pool.pending, 0)
})

t.test('reserve refuses at the queue limit, counting reserved slots, and succeeds again once answered or released', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 4, queueLimit: 10, maxWaitMs: 60_000, onError: (err) => t.fail(String(err)) })
  t.teardown(() => pool.close())
  const message = Buffer.from('m')
  const signature = sign(null, message, privateKey)
  const all = Array.from({ length: 9 }, () => pool.reserve() && pool.verify({ publicKey: raw, message, signature }))
  t.equal(pool.reserve(), true, 'the tenth slot, reserved and not yet spent on verify')
  t.equal(pool.reserve(), false, 'no eleventh')
  pool.release()
  t.equal(pool.reserve(), true, 'a released slot is free again')
  pool.release()
  await Promise.all(all)
  t.equal(pool.pending, 0)
})

t.test('close finishes queued work and is safe to call twice', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 4, queueLimit: 10, maxWaitMs: 60_000, onError: (err) => t.fail(String(err)) })
  const message = Buffer.from('m')
  pool.reserve()
  const pending = pool.verify({ publicKey: raw, message, signature: sign(null, message, privateKey) })
  // A slot taken just before the close, spent just after it: the verify is refused and the slot is returned.
  pool.reserve()
  await Promise.all([pool.close(), pool.close()])
  t.equal(await pending, true)
  t.equal(pool.reserve(), false, 'a closed pool takes no work')
  await t.rejects(pool.verify({ publicKey: raw, message, signature: Buffer.alloc(64) }), { code: 'pool_closed' })
  t.equal(pool.pending, 0, 'no slot is left counted')
})

t.test('new work is refused once the oldest queued request has waited longer than maxWaitMs, though slots are free', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 1, queueLimit: 100_000, maxWaitMs: 2, onError: (err) => t.fail(String(err)) })
  t.teardown(() => pool.close())
  const message = Buffer.from('m')
  const signature = sign(null, message, privateKey)
  const all = Array.from({ length: 2000 }, () => pool.reserve() && pool.verify({ publicKey: raw, message, signature }))
  await new Promise((r) => setTimeout(r, 10))
  t.ok(pool.pending < 100_000 && pool.pending > 0, `${pool.pending} still queued`)
  t.equal(pool.hasRoom(), false, 'the queue is too old to join')
  t.equal(pool.reserve(), false)
  await Promise.all(all)
  t.equal(pool.hasRoom(), true, 'room again once it drained')
})

t.test('a key or signature of the wrong length is refused, never cut to fit the batch', async (t) => {
  const pool = new VerifyPool({ threads: 1, batchSize: 4, queueLimit: 10, maxWaitMs: 60_000, onError: (err) => t.fail(String(err)) })
  t.teardown(() => pool.close())
  const message = Buffer.from('m')
  const signature = sign(null, message, privateKey)
  pool.reserve()
  t.equal(await pool.verify({ publicKey: raw, message, signature: Buffer.concat([signature, Buffer.from([0])]) }), false, 'valid signature plus a byte')
  pool.reserve()
  t.equal(await pool.verify({ publicKey: Buffer.concat([raw, Buffer.from([0])]), message, signature }), false, 'a 33-byte key')
  t.equal(pool.pending, 0)
})
