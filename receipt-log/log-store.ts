import { openClickHouse, ReceiptStoreError, toStoreError, type ClickHouseConnection, type ClickHouseTarget } from '../receipts/index.js'

/**
 * The receipt log's rows in the receipt store (receipts/migrations/004-receipt-log.ts),
 * on a connection of its own to the same ClickHouse (chDB shares one engine per folder).
 * Errors are ReceiptStoreError, `unavailable` worth a retry, as the receipt store's are.
 * The leaf, the signature and the public key travel as base64 text.
 */

export interface SignedRequestRow {
  readonly receipt_id: string
  readonly seq: number
  readonly source_id: string
  readonly test: boolean
  readonly method: string
  readonly path: string
  readonly timestamp: string
  readonly nonce: string
  /** The exact body, UTF-8 (ingest refuses any other). */
  readonly body: string
  readonly key_id: string
  /** Base64 of the 32 raw bytes; empty when a record of an earlier release named a key no longer known. */
  readonly public_key: string
  /** Base64 of the 64 bytes. */
  readonly signature: string
  readonly leaf_index: number | null
  /** Base64 of the leaf; empty for a test signal. */
  readonly leaf: string
  /** JSON of the salts by field, base64 each; `{}` for a test signal. */
  readonly salts: string
}

export interface EntryRow {
  readonly leaf_index: number
  readonly seq: number
  readonly kind: 'signal' | 'dispute' | 'outcome'
  /** The receipt id of a signal or outcome leaf, the dispute id of a dispute leaf. */
  readonly entry_id: string
  /** Base64 of the leaf. */
  readonly leaf: string
}

export interface CheckpointRow {
  readonly size: number
  /** Base64 of the root hash. */
  readonly root: string
  readonly note: string
  /** The log keys that signed it. */
  readonly key_ids: readonly string[]
}

export interface KeySizes {
  readonly key_id: string
  readonly first_size: number
  readonly last_size: number
  readonly checkpoints: number
}

export class ReceiptLogStore {
  readonly #target: ClickHouseTarget
  readonly #ready: () => Promise<void>
  #conn: Promise<ClickHouseConnection> | undefined
  #closed = false

  /** `ready` resolves once the schema is migrated (the receipt store's open). */
  constructor(target: ClickHouseTarget, ready: () => Promise<void>) {
    this.#target = target
    this.#ready = ready
  }

  #connection(): Promise<ClickHouseConnection> {
    if (this.#closed) return Promise.reject(new ReceiptStoreError('store_closed', 'receipt log store: closed'))
    this.#conn ??= (async () => {
      await this.#ready()
      return openClickHouse(this.#target)
    })().catch((err: unknown) => {
      this.#conn = undefined
      throw err
    })
    return this.#conn
  }

  async open(): Promise<void> {
    await this.#connection()
  }

  async #rows<T>(what: string, query: string, params: Record<string, unknown> = {}): Promise<T[]> {
    const conn = await this.#connection()
    try {
      return await (await conn.client.query({ query, query_params: params, format: 'JSONEachRow' })).json<T>()
    } catch (err) {
      throw toStoreError(what, err)
    }
  }

  async #insert(what: string, table: string, values: readonly object[]): Promise<void> {
    if (values.length === 0) return
    const conn = await this.#connection()
    try {
      await conn.client.insert({ table, values: values as Record<string, unknown>[], format: 'JSONEachRow' })
    } catch (err) {
      throw toStoreError(what, err)
    }
  }

  writeRequests(rows: readonly SignedRequestRow[]): Promise<void> {
    return this.#insert('writing signed requests', 'signed_requests', rows)
  }

  writeEntries(rows: readonly EntryRow[]): Promise<void> {
    return this.#insert('writing receipt log entries', 'receipt_log_entries', rows)
  }

  writeCheckpoint(row: CheckpointRow): Promise<void> {
    return this.#insert('writing a checkpoint', 'receipt_log_checkpoints', [{ ...row, created_at: Date.now() }])
  }

  /** Leaves from `from` on, in order, at most `limit`. */
  async entries(from: number, limit: number): Promise<EntryRow[]> {
    const rows = await this.#rows<EntryRow>(
      'reading receipt log entries',
      'SELECT leaf_index, seq, kind, entry_id, leaf FROM receipt_log_entries FINAL WHERE leaf_index >= {from:UInt64} ORDER BY leaf_index LIMIT {limit:UInt32}',
      { from, limit },
    )
    return rows.map((r) => ({ ...r, leaf_index: Number(r.leaf_index), seq: Number(r.seq) }))
  }

  /** The latest checkpoint: the first signed of the largest size. */
  async latestCheckpoint(): Promise<CheckpointRow | undefined> {
    const [row] = await this.#rows<CheckpointRow>('reading the latest checkpoint', 'SELECT size, root, note, key_ids FROM receipt_log_checkpoints ORDER BY size DESC, created_at ASC LIMIT 1')
    return row === undefined ? undefined : { ...row, size: Number(row.size) }
  }

  /** Every log key with the sizes of the checkpoints it signed. */
  async keySizes(): Promise<KeySizes[]> {
    const rows = await this.#rows<KeySizes>(
      'reading the log keys\' checkpoints',
      'SELECT key_id, min(size) AS first_size, max(size) AS last_size, count() AS checkpoints FROM receipt_log_checkpoints ARRAY JOIN key_ids AS key_id GROUP BY key_id',
    )
    return rows.map((r) => ({ key_id: r.key_id, first_size: Number(r.first_size), last_size: Number(r.last_size), checkpoints: Number(r.checkpoints) }))
  }

  /**
   * The last outcome leaf (base64) of each of these receipts among the tree's first `size`
   * leaves, by receipt id. Leaves past `size` are a batch whose write failed and is being
   * retried: not in the tree, so not logged.
   */
  async lastOutcomes(receiptIds: readonly string[], size: number): Promise<Map<string, string>> {
    if (receiptIds.length === 0) return new Map()
    const rows = await this.#rows<{ entry_id: string; leaf: string }>(
      'reading receipts\' outcome leaves',
      "SELECT entry_id, argMax(leaf, leaf_index) AS leaf FROM receipt_log_entries FINAL WHERE kind = 'outcome' AND entry_id IN {ids:Array(String)} AND leaf_index < {size:UInt64} GROUP BY entry_id",
      { ids: receiptIds, size },
    )
    return new Map(rows.map((r) => [r.entry_id, r.leaf]))
  }

  /** Every row kept for these receipts, oldest seq first. */
  async requests(receiptIds: readonly string[]): Promise<SignedRequestRow[]> {
    if (receiptIds.length === 0) return []
    const rows = await this.#rows<SignedRequestRow>(
      'reading signed requests',
      'SELECT * FROM signed_requests WHERE receipt_id IN {ids:Array(String)} ORDER BY receipt_id, seq',
      { ids: receiptIds },
    )
    return rows.map((r) => ({ ...r, seq: Number(r.seq), test: Boolean(r.test), leaf_index: r.leaf_index === null ? null : Number(r.leaf_index) }))
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const conn = await this.#conn?.catch(() => undefined)
    await conn?.close()
  }
}
