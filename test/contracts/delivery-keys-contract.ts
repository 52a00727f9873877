/**
 * How the webhook delivery key ring behaves on any key-value adapter: processes sharing
 * the `delivery-keys` bucket agree on one ring at their first start, sign with another
 * process's rotation once their watch brings it, make one new key of two rotations at
 * once, and move the ring of an old DATA_DIR/delivery-keys.json into the bucket.
 *
 * `fresh(t)` gives an OpenKvBucket on a new, empty store, removed at teardown; the suite
 * opens `delivery-keys` from it once per test and hands that bucket to every
 * DeliveryKeys instance, as processes share one NATS KV bucket.
 */
import { verify } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type tap from 'tap'
import { DeliveryKeyLimitError, DeliveryKeys, publicKeyOf, signedContent, type PublishedDeliveryKey } from '../../delivery/webhooks/delivery-keys.js'
import { encodeRing, newKey, RING_LIMITS } from '../../delivery/webhooks/delivery-key-ring.js'
import type { KvBucket, OpenKvBucket } from '../../storage/index.js'

export type TapTest = Parameters<Parameters<typeof tap.test>[0]>[0]
export type FreshBuckets = (t: TapTest) => Promise<OpenKvBucket>

const DAY = 86_400_000

/** Whether every `v1a` part of `header` verifies with one of `keys`, and each key signed one part. */
function verifiesWith(keys: readonly PublishedDeliveryKey[], header: string, id = 'msg_1', at = 1_700_000_000, body = '{}'): boolean {
  const parts = header.split(' ').map((p) => Buffer.from(p.slice('v1a,'.length), 'base64'))
  return parts.length === keys.length && keys.every((k) => parts.some((sig) => verify(null, signedContent(id, at, body), publicKeyOf(k.public_key), sig)))
}

async function until(what: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!what()) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 5))
  }
}

/**
 * The bucket, whose `hold(n)` makes the next updates wait until `n` more reads of the
 * ring have been made: two rotations are then sure to read the same revision before
 * either writes, the race the expected revision must settle.
 */
function racing(inner: KvBucket): KvBucket & { hold(reads: number): void } {
  let left = 0
  let release: () => void = () => undefined
  let allRead = Promise.resolve()
  return {
    name: inner.name,
    get: async (key) => {
      const entry = await inner.get(key)
      if (--left === 0) release()
      return entry
    },
    create: (key, value) => inner.create(key, value),
    update: async (key, value, revision) => {
      await allRead
      return inner.update(key, value, revision)
    },
    put: (key, value) => inner.put(key, value),
    delete: (key, o) => inner.delete(key, o),
    watch: (o) => inner.watch(o),
    status: () => inner.status(),
    close: () => inner.close(),
    hold(reads) {
      left = reads
      allRead = new Promise<void>((resolve) => (release = resolve))
    },
  }
}

export function deliveryKeysContract(t: TapTest, name: string, fresh: FreshBuckets): void {
  const setup = async (t: TapTest) => {
    const bucket = await (await fresh(t))('delivery-keys', DeliveryKeys.bucketLimits)
    const opened: DeliveryKeys[] = []
    const warnings: string[] = []
    t.teardown(async () => {
      for (const k of opened) await k.close()
      await bucket.close()
    })
    const open = async (more: { legacyFile?: string; on?: KvBucket } = {}) => {
      const keys = await DeliveryKeys.open({ bucket: more.on ?? bucket, onWarning: (m) => warnings.push(m), ...(more.legacyFile !== undefined && { legacyFile: more.legacyFile }) })
      opened.push(keys)
      return keys
    }
    return { bucket, open, warnings }
  }

  const dataDir = async (t: TapTest) => {
    const dir = await mkdtemp(join(tmpdir(), 'delivery-keys-data-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    return dir
  }

  t.test(`${name}: delivery key ring`, async (t) => {
    t.test('a first start makes one active key, and deliveries are signed with it', async (t) => {
      const { open } = await setup(t)
      const keys = await open()
      const published = keys.published()
      t.equal(published.length, 1)
      t.match(published[0], { state: 'active', retires_at: null, public_key: /^whpk_[A-Za-z0-9+/]{43}=$/ })
      t.ok(verifiesWith(published, keys.signature('msg_1', 1_700_000_000, '{}')))
    })

    t.test('processes starting at the same time agree on one ring: one is written, the others take it', async (t) => {
      const { bucket, open } = await setup(t)
      const all = await Promise.all(Array.from({ length: 5 }, () => open()))
      const first = all[0]!.published()
      for (const keys of all) t.same(keys.published(), first, 'every process publishes the same key')
      t.equal(new Set(all.map((k) => k.signature('msg_1', 1_700_000_000, '{}'))).size, 1, 'and signs with it')
      t.equal((await bucket.status()).revision, 1, 'one ring written')
    })

    t.test('a restarted process signs with the ring the bucket holds', async (t) => {
      const { open } = await setup(t)
      const before = await open()
      await before.rotate(DAY)
      await before.close()
      const after = await open()
      t.same(after.published(), before.published())
    })

    t.test("a rotation made by one process is used for signing by another as soon as the watch brings it", async (t) => {
      const { open } = await setup(t)
      const a = await open()
      const b = await open()
      const rotated = await a.rotate(DAY)
      t.same(rotated.map((k) => k.state), ['retiring', 'active'])
      await until(() => b.revision === a.revision)
      t.same(b.published(), rotated, 'b publishes the new key and the retiring one')
      const header = b.signature('msg_2', 1_700_000_001, '{"x":1}')
      t.ok(verifiesWith(rotated, header, 'msg_2', 1_700_000_001, '{"x":1}'), 'b signs with both')
      t.equal(header, a.signature('msg_2', 1_700_000_001, '{"x":1}'), 'the same header as a (Ed25519 is deterministic)')
    })

    t.test('two processes rotating at once make one new key: the loser takes the winner\'s ring and does not rotate again', async (t) => {
      const { bucket, open } = await setup(t)
      const shared = racing(bucket)
      const a = await open({ on: shared })
      const b = await open({ on: shared })
      shared.hold(2)
      const [fromA, fromB] = await Promise.all([a.rotate(DAY), b.rotate(DAY)])
      t.same(fromA, fromB, 'both answer the same ring')
      t.same(fromA.map((k) => k.state), ['retiring', 'active'], 'one new key, not two')
      t.equal((await bucket.status()).revision, 2, 'one rotation written')
      t.same(a.published(), b.published())
    })

    t.test('rotations one after the other on two processes each make a key, even before the watch brought the first', async (t) => {
      const { open } = await setup(t)
      const a = await open()
      const b = await open()
      await a.rotate(DAY)
      const after = await b.rotate(DAY)
      t.same(after.map((k) => k.state), ['retiring', 'retiring', 'active'])
    })

    t.test(`a rotation past ${RING_LIMITS.maxSigningKeys} signing keys is refused and changes nothing; keys whose overlap ended do not count`, async (t) => {
      const { open } = await setup(t)
      const keys = await open()
      for (let i = 1; i < RING_LIMITS.maxSigningKeys; i++) await keys.rotate(DAY)
      const published = keys.published()
      t.equal(published.length, RING_LIMITS.maxSigningKeys)
      const revision = keys.revision
      await t.rejects(keys.rotate(DAY), DeliveryKeyLimitError)
      t.equal(keys.revision, revision, 'nothing written')
      const zero = await keys.rotate(0)
      t.equal(zero.length, RING_LIMITS.maxSigningKeys, 'with an overlap of zero the replaced key stops signing, so the new one fits')
      t.notOk(zero.some((k) => k.key_id === published[published.length - 1]!.key_id), 'the replaced key no longer published')
    })

    t.test('a ring value that holds no keys is not used: signing goes on with the keys held', async (t) => {
      const { bucket, open, warnings } = await setup(t)
      const keys = await open()
      const before = keys.published()
      await bucket.put('ring', new TextEncoder().encode('{"keys":"none"}'))
      await until(() => warnings.length > 0)
      t.match(warnings[0], /holds no keys/)
      t.same(keys.published(), before)
    })

    t.test('migration: the ring of an old DATA_DIR/delivery-keys.json becomes the bucket\'s on the first start, and the file is removed', async (t) => {
      const { open } = await setup(t)
      const dir = await dataDir(t)
      const old = [{ ...newKey(Date.now() - 2 * DAY), retires_at: new Date(Date.now() + DAY).toISOString() }, newKey(Date.now() - DAY)]
      const file = join(dir, 'delivery-keys.json')
      await writeFile(file, JSON.stringify({ keys: old }, null, 1), { mode: 0o600 })
      const keys = await open({ legacyFile: file })
      t.same(keys.published().map((k) => k.public_key), old.map((k) => `whpk_${k.public_key}`), 'renters verify with the keys they already have')
      t.ok(verifiesWith(keys.published(), keys.signature('msg_1', 1_700_000_000, '{}')))
      t.same(await readdir(dir), [], 'the file is gone: the bucket is where the ring lives')
      const other = await open()
      t.same(other.published(), keys.published(), 'another process takes the migrated ring')
    })

    t.test('migration: an old file whose ring lost to one already in the bucket is set aside, not used and not deleted', async (t) => {
      const { bucket, open, warnings } = await setup(t)
      const first = await open()
      const dir = await dataDir(t)
      const file = join(dir, 'delivery-keys.json')
      const text = JSON.stringify({ keys: [newKey(Date.now())] })
      await writeFile(file, text, { mode: 0o600 })
      const second = await open({ legacyFile: file })
      t.same(second.published(), first.published(), 'the bucket\'s ring is used')
      t.same(await readdir(dir), ['delivery-keys.json.unused'])
      t.equal(await readFile(join(dir, 'delivery-keys.json.unused'), 'utf8'), text)
      t.match(warnings.join('\n'), /not used/)
      t.equal((await bucket.status()).revision, 1)
    })

    t.test('migration: a file the bucket already took (a start that stopped before removing it) is removed', async (t) => {
      const { bucket, open } = await setup(t)
      const dir = await dataDir(t)
      const ring = [newKey(Date.now())]
      await bucket.create('ring', encodeRing(ring))
      const file = join(dir, 'delivery-keys.json')
      await writeFile(file, JSON.stringify({ keys: ring }), { mode: 0o600 })
      const keys = await open({ legacyFile: file })
      t.same(keys.published().map((k) => k.key_id), [ring[0]!.key_id])
      t.same(await readdir(dir), [])
    })

    t.test('migration: an old file that holds no ring stops the start with a message naming it', async (t) => {
      const { bucket, open } = await setup(t)
      const dir = await dataDir(t)
      const file = join(dir, 'delivery-keys.json')
      await writeFile(file, '{"keys":', { mode: 0o600 })
      await t.rejects(open({ legacyFile: file }), /delivery-keys\.json holds no delivery keys/)
      t.equal(await bucket.get('ring'), null, 'no new ring written in its place')
    })
  })
}
