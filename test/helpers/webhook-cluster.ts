import { verify } from 'node:crypto'
import { noDisputes } from './no-disputes.js'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { DeliveryKeys, publicKeyOf, signedContent } from '../../delivery/webhooks/delivery-keys.js'
import { shardOf } from '../../delivery/webhooks/shard-lease.js'
import { WebhookSecrets } from '../../delivery/webhooks/webhook-secrets.js'
import { Webhooks, type WebhooksOptions } from '../../delivery/webhooks/webhooks.js'
import { openJournal, type Journal } from '../../pipeline/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import { fileKvBuckets, type KvBucket } from '../../storage/index.js'
import { cuttable } from './cuttable-bucket.js'

/**
 * Several webhook "processes" (Webhooks instances, each with its own DATA_DIR) in one
 * test process, sharing one signal journal and one `webhooks` bucket as cluster
 * processes share JetStream and NATS KV; and a real HTTP receiver. Unlike a deployment,
 * where every process signs with the one ring of the shared `delivery-keys` bucket, each
 * process here has a ring bucket of its own, so a delivery's signature tells which
 * process sent it.
 */

export interface Received {
  readonly id: string
  readonly timestamp: string
  readonly signature: string
  readonly body: string
  readonly at: number
  readonly rentalId: string
  readonly eventId: string
}

export const rentalOf = (rentalId: string, sourceId: string): RentalRecord => ({
  rental_id: rentalId, renter_id: `renter_${rentalId}`, source_id: sourceId, creator_id: 'creator_a', state: 'active',
  starts_at: '2020-01-01T00:00:00.000Z', expires_at: null, ended_at: null, end_reason: null, created_at: '2020-01-01T00:00:00.000Z',
})

let signals = 0
export function signalBytes(sourceId: string): Uint8Array {
  const n = ++signals
  const now = new Date().toISOString()
  return Buffer.from(JSON.stringify({
    v: 1, source_id: sourceId, signal_id: `sig_${String(n).padStart(8, '0')}`, key_id: 'key_a', test: false, received_at: now, emitted_at: now,
    token: 'So11111111111111111111111111111111111111112', severity: 'warning', confidence: 80, note: 'n', idempotency_key: null, body_sha256: 'ab',
    request_timestamp: now, nonce: `nonce-${n}`, signature: 'c2ln', body: '{}',
  }))
}

export { cuttable } from './cuttable-bucket.js'
export { orderProblems } from './webhook-order.js'
export { until } from './wait-until.js'

export interface Cluster {
  readonly dir: string
  readonly journal: Journal
  readonly bucket: KvBucket
  readonly got: Received[]
  readonly url: string
  /** Opens a process on DATA_DIR `dir/<name>` (the same name is the same holder id). */
  open(name: string, leaseMs: number, more?: Partial<WebhooksOptions>): Promise<{ webhooks: Webhooks; bucket: ReturnType<typeof cuttable>; whpk: string }>
  push(sourceId: string): Promise<number>
}

/** `status` answers each delivery (200 when omitted). */
export async function cluster(t: Test, rentals: Map<string, RentalRecord>, status: (r: Received) => number = () => 200): Promise<Cluster> {
  const dir = await mkdtemp(join(tmpdir(), 'webhook-cluster-'))
  const journal = await openJournal({ dir: join(dir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  const bucket = await fileKvBuckets({ dir: join(dir, 'kv') })('webhooks', { maxKeys: 100_000, maxValueBytes: 512 * 1024 })
  const got: Received[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      const parsed = JSON.parse(body) as { rental_id: string; event_id: string }
      const received = { id: String(req.headers['webhook-id']), timestamp: String(req.headers['webhook-timestamp']), signature: String(req.headers['webhook-signature']), body, at: Date.now(), rentalId: parsed.rental_id, eventId: parsed.event_id }
      got.push(received)
      res.writeHead(status(received)).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const open: Webhooks[] = []
  /** Each process's own ring bucket, kept across its restarts (the same name is the same process). */
  const ringBuckets = new Map<string, KvBucket>()
  const secretBuckets = new Map<string, KvBucket>()
  t.teardown(async () => {
    for (const w of open) await w.close().catch(() => undefined)
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
    for (const b of ringBuckets.values()) await b.close()
    for (const b of secretBuckets.values()) await b.close()
    await bucket.close()
    await journal.close()
    await rm(dir, { recursive: true, force: true })
  })
  return {
    dir, journal, bucket, got,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    async open(name, leaseMs, more = {}) {
      const own = cuttable(bucket)
      let ring = ringBuckets.get(name)
      if (ring === undefined) ringBuckets.set(name, (ring = await fileKvBuckets({ dir: join(dir, name, 'kv') })('delivery-keys', DeliveryKeys.bucketLimits)))
      let secrets = secretBuckets.get(name)
      if (secrets === undefined) secretBuckets.set(name, (secrets = await fileKvBuckets({ dir: join(dir, name, 'kv') })('webhook-secrets', WebhookSecrets.bucketLimits(100))))
      const webhooks = await Webhooks.open({
        dataDir: join(dir, name), bucket: own, keysBucket: ring, secretsBucket: secrets, log: journal, rental: (id) => rentals.get(id), disputes: noDisputes(), allowPrivateNetworks: true,
        retryWindowMs: 60_000, retryFirstMs: 50, disableAfterMs: 60_000, maxConnections: 16, keyOverlapMs: 60_000, leaseMs, timeoutMs: 2000, testsPerMinute: 10, ...more,
      })
      open.push(webhooks)
      return { webhooks, bucket: own, whpk: webhooks.deliveryKeys()[0]!.public_key }
    },
    async push(sourceId) {
      return (await journal.append(`k${Math.random()}`, signalBytes(sourceId), { sourceId })).seq
    },
  }
}

/** Whether the delivery's signature verifies with the published key `whpk` (node:crypto, independent of the signer). */
export function signedBy(whpk: string, r: Received): boolean {
  return r.signature.split(' ').some((part) => {
    const [version, sig] = part.split(',')
    return version === 'v1a' && verify(null, signedContent(r.id, Number(r.timestamp), r.body), publicKeyOf(whpk), Buffer.from(sig!, 'base64'))
  })
}

/** Rental ids whose shards the given shard sets hold: `count` for each set. */
export function rentalIdsIn(shardSets: readonly (readonly number[])[], count: number): string[][] {
  const out = shardSets.map(() => [] as string[])
  for (let i = 0; out.some((ids) => ids.length < count); i++) {
    const id = `rnt_lease${i}`
    const k = shardSets.findIndex((set) => set.includes(shardOf(id)))
    if (k >= 0 && out[k]!.length < count) out[k]!.push(id)
  }
  return out
}

