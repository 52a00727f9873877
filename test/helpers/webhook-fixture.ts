import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { Agent } from 'undici'
import { LiveTail } from '../../delivery/live-tail.js'
import { noDisputes } from './no-disputes.js'
import { DeliveryKeys } from '../../delivery/webhooks/delivery-keys.js'
import { guardedConnector } from '../../delivery/webhooks/guarded-connector.js'
import { WebhookSecrets } from '../../delivery/webhooks/webhook-secrets.js'
import { WebhookState, type WebhookEndpoint } from '../../delivery/webhooks/webhook-state.js'
import { systemLookup } from '../../delivery/webhooks/webhook-url.js'
import { WebhookWorkers, type WebhookWorkerOptions } from '../../delivery/webhooks/webhook-worker.js'
import { openJournal, type Journal, type SignalLog } from '../../pipeline/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import { fileKvBuckets, type KvBucket } from '../../storage/index.js'

/**
 * Webhook workers on a real journal, a real file KV bucket and a real local receiver,
 * with counters on what they do to the log (reads) and to the store (writes by key kind).
 */

export function rentalOf(n: number, sourceId: string): RentalRecord {
  return {
    rental_id: `rnt_scale${String(n).padStart(5, '0')}`,
    renter_id: 'renter_a',
    source_id: sourceId,
    creator_id: 'creator_a',
    state: 'active',
    starts_at: '2020-01-01T00:00:00.000Z',
    expires_at: null,
    ended_at: null,
    end_reason: null,
    created_at: '2020-01-01T00:00:00.000Z',
  }
}

export function signalOf(n: number, sourceId: string): Uint8Array {
  const at = new Date().toISOString()
  return Buffer.from(JSON.stringify({
    v: 1, source_id: sourceId, signal_id: `sig_${String(n).padStart(8, '0')}`, key_id: 'key_a', test: false,
    received_at: at, emitted_at: at, token: 'So11111111111111111111111111111111111111112',
    severity: 'warning', confidence: 80, note: 'n', idempotency_key: null, body_sha256: 'ab', request_timestamp: at,
    nonce: `nonce-${n}`, signature: 'c2ln', body: '{}',
  }))
}

export { sharedReceiver, type Delivery } from './webhook-receiver.js'

/** The journal as a SignalLog, counting reads (what a loop does to the log when it is not fed by the tail). */
function countingLog(journal: Journal, counts: { reads: number }): SignalLog {
  return {
    open: () => journal.open(),
    append: (id, data, o) => journal.append(id, data, o),
    read: (start, max) => {
      counts.reads++
      return journal.read(start, max)
    },
    info: () => journal.info(),
    consumer: (name, o) => journal.consumer(name, o),
    consumerInfo: (name) => journal.consumerInfo(name),
    consumers: () => journal.consumers(),
    deleteConsumer: (name) => journal.deleteConsumer(name),
    sync: () => journal.sync(),
    close: () => journal.close(),
  }
}

/** The bucket, counting writes by the kind of key (`position`, `attempts`, `endpoint`...). */
function countingBucket(bucket: KvBucket, writes: Map<string, number>): KvBucket {
  const count = (key: string) => {
    const kind = key.slice(0, key.indexOf('.'))
    writes.set(kind, (writes.get(kind) ?? 0) + 1)
  }
  return {
    name: bucket.name,
    get: (key) => bucket.get(key),
    create: (key, value) => (count(key), bucket.create(key, value)),
    update: (key, value, revision) => (count(key), bucket.update(key, value, revision)),
    put: (key, value) => (count(key), bucket.put(key, value)),
    delete: (key, o) => (count(key), bucket.delete(key, o)),
    watch: (o) => bucket.watch(o),
    status: () => bucket.status(),
    close: () => bucket.close(),
  }
}

export async function webhookFixture(t: Test, rentals: readonly RentalRecord[], more: Partial<WebhookWorkerOptions> = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'webhook-fixture-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const journal: Journal = await openJournal({ dir: join(dir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  const openBucket = fileKvBuckets({ dir: join(dir, 'kv') })
  const rawBucket = await openBucket('webhooks', { maxKeys: rentals.length * 6 + 100, maxValueBytes: 512 * 1024 })
  const keysBucket = await openBucket('delivery-keys', DeliveryKeys.bucketLimits)
  const writes = new Map<string, number>()
  const logCounts = { reads: 0 }
  const state = new WebhookState(countingBucket(rawBucket, writes))
  const keys = await DeliveryKeys.open({ bucket: keysBucket })
  const secretsBucket = await openBucket('webhook-secrets', WebhookSecrets.bucketLimits(rentals.length + 1))
  const secrets = await WebhookSecrets.open(secretsBucket, (e) => { throw e })
  const dispatcher = new Agent({ connect: guardedConnector({ allowPrivate: true, lookup: systemLookup, timeoutMs: 2000 }), connections: 64 })
  const results: string[] = []
  const errors: unknown[] = []
  const byId = new Map(rentals.map((r) => [r.rental_id, r]))
  const log = countingLog(journal, logCounts)
  const tail = await LiveTail.start(journal, (e) => errors.push(e))
  const make = () =>
    new WebhookWorkers({
      log, tail, state, keys, secrets, rental: (id) => byId.get(id), disputes: noDisputes(), dispatcher,
      timeoutMs: 2000, retryDelaysMs: [50, 100, 150], retryWindowMs: 60_000, disableAfterMs: 60_000, maxConcurrent: 64,
      onAttempt: (r) => results.push(r), onError: (e) => errors.push(e), ...more,
    })
  let workers = make()
  t.teardown(async () => {
    await workers.close()
    await tail.close()
    await dispatcher.close()
    await keys.close()
    await secrets.close()
    await secretsBucket.close()
    await keysBucket.close()
    await rawBucket.close()
    await journal.close()
  })
  /** Sets each rental's endpoint to `${base}/hook/<rental_id>`, starting at `from` (default: the log's next record). */
  const register = async (base: string, which: readonly RentalRecord[] = rentals, from?: number) => {
    const at = new Date().toISOString()
    const startSeq = from ?? (await journal.info()).lastSeq + 1
    await Promise.all(which.map((r) => state.modifyEndpoint(r.rental_id, () => ({ rental_id: r.rental_id, url: `${base}/hook/${r.rental_id}`, start_seq: startSeq, created_at: at, updated_at: at, state: 'enabled', disabled_reason: null, disabled_at: null, last_success_at: null, failing_since: null }) satisfies WebhookEndpoint)))
  }
  const restart = async () => {
    await workers.close()
    workers = make()
    await workers.start()
  }
  await workers.start()
  return { journal, tail, state, bucket: rawBucket, results, errors, writes, logCounts, register, restart, workers: () => workers }
}

export async function until(what: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await what())) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 20))
  }
}
