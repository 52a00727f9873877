import { generateKeyPairSync } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@clickhouse/client'
import { openJournal, type Journal } from '../../pipeline/index.js'
import { ReceiptStoreError, type ReceiptStore } from '../../receipts/index.js'
import { Recorder, type RecorderOptions } from '../../recorder/index.js'
import type { Registry, SourceRecord } from '../../registry/index.js'
import { openRegistry, registryBucket } from './registry-bucket.js'
import type { Manifest } from '../../schemas/index.js'
import { MANIFEST } from './api.js'

const require = createRequire(import.meta.url)

/**
 * A fault injector around the real store: while `failing`, every call the recorder makes
 * throws `unavailable` as ClickHouse down would; with `loseConfirmations` > 0, that many
 * `record` calls write their batch and then throw, as a confirmation lost on the way back
 * would (the recorder must nak and be handed the same records again).
 */
export class FaultyStore implements ReceiptStore {
  failing = false
  loseConfirmations = 0
  recordCalls = 0
  readonly #store: ReceiptStore

  constructor(store: ReceiptStore) {
    this.#store = store
  }

  #check(): void {
    if (this.failing) throw new ReceiptStoreError('unavailable', 'receipt store: injected outage')
  }

  async open() {
    this.#check()
    return this.#store.open()
  }
  async record(batch: Parameters<ReceiptStore['record']>[0], options?: Parameters<ReceiptStore['record']>[1]) {
    this.recordCalls++
    this.#check()
    const result = await this.#store.record(batch, options)
    if (this.loseConfirmations > 0) {
      this.loseConfirmations--
      throw new ReceiptStoreError('unavailable', 'receipt store: injected lost confirmation (the batch was written)')
    }
    return result
  }
  async trackRecordedIds() {
    this.#check()
    await this.#store.trackRecordedIds?.()
  }
  async get(id: string) {
    this.#check()
    return this.#store.get(id)
  }
  list(q: Parameters<ReceiptStore['list']>[0]) {
    return this.#store.list(q)
  }
  export(...args: Parameters<ReceiptStore['export']>) {
    return this.#store.export(...args)
  }
  sourceStats(...args: Parameters<ReceiptStore['sourceStats']>) {
    return this.#store.sourceStats(...args)
  }
  sourceActivity(...args: Parameters<ReceiptStore['sourceActivity']>) {
    return this.#store.sourceActivity(...args)
  }
  recordOutcomes(items: Parameters<ReceiptStore['recordOutcomes']>[0]) {
    return this.#store.recordOutcomes(items)
  }
  async recordDisputeStatuses(items: Parameters<ReceiptStore['recordDisputeStatuses']>[0]) {
    this.#check()
    return this.#store.recordDisputeStatuses(items)
  }
  async ping() {
    this.#check()
    return this.#store.ping()
  }
  close() {
    return this.#store.close()
  }
}

/**
 * Every row the recorder wrote for a source, unfolded (no FINAL): one per receipt means
 * nothing was written twice. `where` is the chDB folder, or a ClickHouse server's URL.
 */
export async function recorderRows(where: string, sourceId: string): Promise<Map<string, number>> {
  const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
  const client = /^https?:\/\//.test(where) ? createClient({ url: where }) : createClient({ connection: createChdbConnection({ path: where }) as never })
  try {
    const rows = await (
      await client.query({
        query: `SELECT signal_id, count() AS n FROM receipts WHERE source_id = {s:String} AND signal_id != '' GROUP BY signal_id`,
        query_params: { s: sourceId },
        format: 'JSONEachRow',
      })
    ).json<{ signal_id: string; n: string | number }>()
    return new Map(rows.map((r) => [r.signal_id, Number(r.n)]))
  } finally {
    await client.close()
  }
}

/** A signal record as the ingest pipeline writes it. */
export function signalRecordBytes(sourceId: string, signalId: string, options: { test?: boolean; keyId?: string; emittedAt?: string; receivedAt?: string } = {}): Buffer {
  const now = new Date().toISOString()
  return Buffer.from(
    JSON.stringify({
      v: 1,
      source_id: sourceId,
      signal_id: signalId,
      key_id: options.keyId ?? 'key_x',
      test: options.test ?? false,
      received_at: options.receivedAt ?? now,
      emitted_at: options.emittedAt ?? now,
      token: 'So11111111111111111111111111111111111111112',
      severity: 'warning',
      confidence: 80,
      note: null,
      idempotency_key: null,
      body_sha256: '0'.repeat(64),
      request_timestamp: '0',
      nonce: `n-${signalId}`,
      signature: '',
      body: '{}',
    }),
  )
}

export interface Bench {
  readonly dir: string
  readonly journal: Journal
  readonly registry: Registry
  readonly source: SourceRecord
  /** Appends signal records for the source, as ingest does; resolves with their seqs. */
  append(signalIds: readonly string[], options?: { test?: boolean; sourceId?: string; keyId?: string }): Promise<number[]>
  readonly lastSeq: () => number
  /** Warn and error lines the recorder logged. */
  readonly logged: Array<{ level: string; msg: string; obj: Record<string, unknown> }>
  recorder(store: ReceiptStore, options?: Partial<RecorderOptions>): Recorder
}

let sources = 0

/** A real journal and a real registry (a file bucket in a throwaway folder) with one agent and source. */
export async function bench(t: { teardown(fn: () => unknown): void }, journalOptions: { segmentBytes?: number } = {}): Promise<Bench> {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-recorder-'))
  const journal = await openJournal({ dir: join(dir, 'journal'), fsync: 'never', dedupWindowMs: 0, ...journalOptions })
  const registry = await openRegistry(t, await registryBucket(t), 'admin-token-for-the-recorder-tests-0000')
  sources++
  const agent = await registry.createAgent({ agent_id: `agent_${sources}`, creator_id: `creator_${sources}`, slots: 1 })
  const source = await registry.createSource({ agent, manifest: MANIFEST as unknown as Manifest, listing: { public_receipts: false } })
  let last = 0
  const logged: Bench['logged'] = []
  const recorders: Recorder[] = []
  t.teardown(async () => {
    for (const r of recorders) await r.destroy()
    await journal.close()
    await rm(dir, { recursive: true, force: true })
  })
  const log = (level: string) => (obj: object, msg: string) => void logged.push({ level, msg, obj: obj as Record<string, unknown> })
  return {
    dir,
    journal,
    registry,
    source,
    async append(signalIds, options = {}) {
      const sourceId = options.sourceId ?? source.source_id
      const seqs = await Promise.all(signalIds.map((id) => journal.append(`${sourceId}/${id}`, signalRecordBytes(sourceId, id, options), { sourceId }).then((r) => r.seq)))
      last = Math.max(last, ...seqs)
      return seqs
    },
    lastSeq: () => last,
    logged,
    recorder(store, options = {}) {
      const r = new Recorder({ log: journal, store, registry, lastSeq: () => last, logger: { info: () => undefined, warn: log('warn'), error: log('error') }, flushMs: 20, retryBaseMs: 20, retryMaxMs: 200, ...options })
      recorders.push(r)
      return r
    },
  }
}

/** A fresh key for `sourceId`, revoked, so that disputes may name what it signed. */
export async function revokedKey(registry: Registry, sourceId: string): Promise<string> {
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
  const key = await registry.addKey(sourceId, raw)
  await registry.revokeKey(sourceId, key.key_id, 'compromise')
  return key.key_id
}

/** Polls `check` every 20 ms until it holds, or fails after `ms`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 45_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}
