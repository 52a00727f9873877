import { setTimeout as sleep } from 'node:timers/promises'
import { decodeSignalRecord, isLogError, isTransientLogError, MAX_FETCH_RECORDS, outcomesIn, placementIn, type LogConsumer, type LogRecord, type OutcomeItem, type SignalLog, type SignalRecord } from '../pipeline/index.js'
import { isReceiptStoreError, receiptIdOf } from '../receipts/index.js'
import { Backoff } from '../recorder/index.js'
import type { DisputeRecord, KeyRecord, Registry } from '../registry/index.js'
import { decodeLeaf, type OutcomeLeaf } from '../sdk/receipt-leaf.js'
import { buildDispute, buildOutcome, buildSignal } from './leaf-builder.js'
import { ReceiptLogError } from './log-error.js'
import { outcomeChanges } from './outcome-rule.js'
import type { LogKeys } from './log-keys.js'
import type { CheckpointRow, EntryRow, ReceiptLogStore, SignedRequestRow } from './log-store.js'
import { leafHash, MerkleTree } from './merkle-tree.js'
import { checkpointText, signNote } from './signed-note.js'
import { checkAgainst, loadLeaves } from './tree-loader.js'

const IDLE_WAIT_MS = 30_000

/** A signal record this release can log, or undefined. */
function readSignal(r: LogRecord): SignalRecord | undefined {
  try {
    const s = decodeSignalRecord(r.data)
    const ok = s?.v === 1 && typeof s.source_id === 'string' && typeof s.signal_id === 'string' && typeof s.body === 'string' && typeof s.signature === 'string' && typeof s.received_at === 'string'
    return ok ? s : undefined
  } catch {
    return undefined
  }
}

export interface SequencerLogger {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
  error(fields: object, message: string): void
}

export interface SequencerOptions {
  readonly log: SignalLog
  readonly store: ReceiptLogStore
  readonly keys: LogKeys
  readonly registry: Pick<Registry, 'keysOf' | 'dispute' | 'disputeGate'>
  /** The checkpoints' origin (and the keys' name). */
  readonly origin: string
  /** RECEIPT_LOG_CHECKPOINT_MS: the least time between two checkpoints. */
  readonly checkpointMs: number
  readonly batchMax?: number
  readonly logger: SequencerLogger
  /** The durable consumer (under a lease on NATS); `log.consumer('receipt-log')` by default. */
  readonly openConsumer?: () => Promise<LogConsumer>
  /** Whether this process may still write (its lease holds); checked before every write. */
  readonly holds?: () => boolean
  /** After each checkpoint is persisted: this process's readers take it at once. */
  readonly onCheckpoint?: (checkpoint: CheckpointRow) => void
  /** The log cannot go on without forking (ReceiptLogError log_inconsistent): the process should stop. */
  readonly onFatal: (err: Error) => void
  readonly retryMaxMs?: number
}

export interface SequencerStatus {
  readonly size: number
  readonly checkpoint_size: number
  readonly last_seq: number
}

const transient = (err: unknown) => (isReceiptStoreError(err) && err.transient) || isTransientLogError(err)

/**
 * The receipt log's one writer: a durable consumer (`receipt-log`) of the signal log that
 * turns each record into its leaf, in log order, and signs checkpoints.
 *
 * - A signal record gives its signed request a row; one that is not a test, whose receipt
 *   has no leaf yet, also gives a leaf (a retry deduplicated at ingest was never appended;
 *   a signal_id accepted again after the dedup window makes no second receipt and so no
 *   second leaf).
 * - A dispute placement gives a leaf once the registry holds its dispute accepted at that
 *   placement; the sequencer waits at the placement as delivery does (registry/dispute-gate.ts).
 * - A post of outcomes (pipeline/outcome-record.ts) gives a leaf to each verdict that changes
 *   its receipt, judged against the receipt's last outcome leaf (./outcome-rule.ts); a
 *   re-post that changes nothing gives none.
 * - Rows are written before the tree takes the leaves, and the position acknowledged after:
 *   a crash at any point leaves either no leaf or every leaf of the batch stored, and the
 *   records after the last stored leaf are handed out again.
 * - A checkpoint is persisted before anyone is shown it, at most every `checkpointMs`
 *   while leaves arrive, and a size that has one is never signed again.
 * - At start, once its consumer (and on NATS its lease) is held, the tree is rebuilt from
 *   the stored leaves and must hash to the latest checkpoint; otherwise nothing more is
 *   signed (`log_inconsistent`).
 */
export class ReceiptLogSequencer {
  readonly #o: SequencerOptions
  readonly #tree = new MerkleTree()
  readonly #stopper = new AbortController()
  #consumer: LogConsumer | undefined
  #running: Promise<void> | undefined
  #closing = false
  #lastSeq = 0
  #checkpoint: CheckpointRow | undefined
  #lastCheckpointAt = Number.NEGATIVE_INFINITY

  constructor(options: SequencerOptions) {
    this.#o = options
  }

  start(): void {
    this.#running ??= this.#run().catch((err: unknown) => {
      if (this.#closing) return
      this.#o.logger.error({ err }, 'receipt log sequencer stopped on an unexpected error')
      this.#o.onFatal(err as Error)
    })
  }

  status(): SequencerStatus {
    return { size: this.#tree.size, checkpoint_size: this.#checkpoint?.size ?? 0, last_seq: this.#lastSeq }
  }

  /** Finishes the batch in flight, then stops. Safe to call twice. */
  async close(): Promise<void> {
    this.#closing = true
    this.#stopper.abort()
    await this.#running
    await this.#consumer?.close()
  }

  async #pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.#stopper.signal }).catch(() => undefined)
  }

  /** Runs `step` until it succeeds, with backoff; false when closing first. A log_inconsistent error is thrown on. */
  async #retry(what: string, backoff: Backoff, step: () => Promise<void>): Promise<boolean> {
    for (;;) {
      if (this.#closing) return false
      try {
        await step()
        backoff.reset()
        return true
      } catch (err) {
        if (err instanceof ReceiptLogError || this.#closing) throw err
        if (isLogError(err, 'log_closed')) return false
        const slow = !transient(err)
        this.#o.logger[slow ? 'error' : 'warn']({ err, failures: backoff.failures + 1 }, `receipt log: ${what} failed; retrying`)
        await this.#pause(backoff.next(slow))
      }
    }
  }

  async #run(): Promise<void> {
    const backoff = new Backoff({ baseMs: 100, maxMs: this.#o.retryMaxMs ?? 30_000 })
    try {
      // The consumer first: on NATS it comes with the lease, which a standby waits for while
      // another sequencer writes. The tree is rebuilt once this process is the only writer,
      // from every leaf the one before it stored; rebuilt earlier, it would miss those and
      // write other leaves at their indexes, forking the log.
      let consumer: LogConsumer | undefined
      if (!(await this.#retry('opening its log consumer', backoff, async () => void (consumer = await (this.#o.openConsumer?.() ?? this.#o.log.consumer('receipt-log'))))))
        return
      this.#consumer = consumer
      if (!(await this.#retry('rebuilding the tree', backoff, () => this.#rebuild()))) return
      while (!this.#closing) {
        const due = this.#tree.size > (this.#checkpoint?.size ?? 0) ? this.#lastCheckpointAt + this.#o.checkpointMs - performance.now() : IDLE_WAIT_MS
        let records: readonly LogRecord[] = []
        if (!(await this.#retry('reading the log', backoff, async () => {
          const got = await consumer!.fetch(Math.min(MAX_FETCH_RECORDS, this.#o.batchMax ?? 1000), Math.max(1, Math.min(IDLE_WAIT_MS, Math.round(due))), this.#stopper.signal)
          if (got.lost !== null) this.#o.logger.error({ from_seq: got.lost.fromSeq, to_seq: got.lost.toSeq }, 'receipt log: the signal log removed these records (retention) before they were logged: they have no leaf')
          records = got.records
        })))
          break
        const fresh = records.filter((r) => r.seq > this.#lastSeq)
        if (fresh.length > 0 && !(await this.#retry('logging a batch', backoff, () => this.#sequence(fresh)))) break
        if (records.length > 0 && !(await this.#retry('acknowledging', backoff, () => consumer!.ack(records[records.length - 1]!.seq)))) break
        if (this.#tree.size > (this.#checkpoint?.size ?? 0) && performance.now() >= this.#lastCheckpointAt + this.#o.checkpointMs) {
          if (!(await this.#retry('signing a checkpoint', backoff, () => this.#sign()))) break
        }
      }
    } catch (err) {
      if (this.#closing && !(err instanceof ReceiptLogError)) return
      throw err
    }
  }

  async #rebuild(): Promise<void> {
    await this.#o.store.open()
    this.#lastSeq = Math.max(this.#lastSeq, await loadLeaves(this.#o.store, this.#tree))
    const latest = await this.#o.store.latestCheckpoint()
    if (latest !== undefined) checkAgainst(this.#tree, latest)
    this.#checkpoint = latest
    this.#o.logger.info({ leaves: this.#tree.size, checkpoint_size: latest?.size ?? 0 }, 'receipt log: tree rebuilt from the store')
  }

  #checkHeld(): void {
    if (this.#o.holds !== undefined && !this.#o.holds()) throw new Error('receipt log: this process no longer holds the sequencer lease')
  }

  #publicKeyOf = (sourceId: string, keyId: string): Uint8Array | undefined => {
    const k: KeyRecord | undefined = this.#o.registry.keysOf(sourceId).find((r) => r.key_id === keyId)
    return k === undefined ? undefined : Buffer.from(k.public_key, 'base64url')
  }

  /** The leaves of a batch: written, then taken into the tree. Throws with nothing taken. */
  async #sequence(records: readonly LogRecord[]): Promise<void> {
    const items: Array<{ readonly signal: SignalRecord; readonly seq: number } | { readonly placement: LogRecord } | { readonly outcomes: readonly OutcomeItem[]; readonly seq: number }> = []
    for (const r of records) {
      if (placementIn(r) !== undefined) {
        items.push({ placement: r })
        continue
      }
      const outcomes = outcomesIn(r)
      if (outcomes !== undefined) {
        items.push({ outcomes, seq: r.seq })
        continue
      }
      const signal = readSignal(r)
      if (signal !== undefined) items.push({ signal, seq: r.seq })
      else this.#o.logger.error({ seq: r.seq }, 'receipt log: a log record is not a signal record this release can read; it has no leaf')
    }
    const known = await this.#loggedReceipts(items.flatMap((i) => ('signal' in i ? [receiptIdOf(i.signal.source_id, i.signal.signal_id)] : [])))
    const lastOutcome = await this.#lastOutcomes(items.flatMap((i) => ('outcomes' in i ? i.outcomes.map((o) => o.receipt_id) : [])))
    const requests: SignedRequestRow[] = []
    const entries: EntryRow[] = []
    const leaves: Uint8Array[] = []
    for (const item of items) {
      const at = this.#tree.size + leaves.length
      if ('placement' in item) {
        const d = await this.#acceptedAt(item.placement)
        if (d === undefined) continue
        const built = buildDispute(d, item.placement.seq, at)
        entries.push(built.entry)
        leaves.push(built.leaf)
        continue
      }
      if ('outcomes' in item) {
        for (const o of item.outcomes) {
          if (!outcomeChanges(lastOutcome.get(o.receipt_id), o)) continue
          const built = buildOutcome(o, item.seq, this.#tree.size + leaves.length)
          lastOutcome.set(o.receipt_id, built.decoded)
          entries.push(built.entry)
          leaves.push(built.leaf)
        }
        continue
      }
      const receiptId = receiptIdOf(item.signal.source_id, item.signal.signal_id)
      if (known.has(receiptId)) continue
      known.add(receiptId)
      const built = buildSignal(item.signal, item.seq, at, this.#publicKeyOf)
      requests.push(built.request)
      if (built.entry !== undefined) {
        entries.push(built.entry)
        leaves.push(built.leaf!)
      }
    }
    this.#checkHeld()
    // Requests first: a leaf is never stored without the salts that open it.
    await this.#o.store.writeRequests(requests)
    this.#checkHeld()
    await this.#o.store.writeEntries(entries)
    for (const leaf of leaves) this.#tree.appendHash(leafHash(leaf))
    this.#lastSeq = records[records.length - 1]!.seq
  }

  /** Receipts among `ids` that already have their row: a test signal's, or a leaf in the tree. */
  async #loggedReceipts(ids: readonly string[]): Promise<Set<string>> {
    const known = new Set<string>()
    for (const row of await this.#o.store.requests([...new Set(ids)])) {
      if (row.test) known.add(row.receipt_id)
      else if (row.leaf_index !== null && row.leaf_index < this.#tree.size && this.#tree.leafHashAt(row.leaf_index).equals(leafHash(Buffer.from(row.leaf, 'base64')))) known.add(row.receipt_id)
    }
    return known
  }

  /** The last outcome leaf in the tree of each receipt among `ids`. */
  async #lastOutcomes(ids: readonly string[]): Promise<Map<string, OutcomeLeaf>> {
    const out = new Map<string, OutcomeLeaf>()
    for (const [id, leaf] of await this.#o.store.lastOutcomes([...new Set(ids)], this.#tree.size)) {
      const decoded = decodeLeaf(Buffer.from(leaf, 'base64'))
      if (decoded.kind === 'outcome') out.set(id, decoded)
    }
    return out
  }

  /** The dispute a placement record placed, once the registry decided it; undefined when it was not accepted there. */
  async #acceptedAt(record: LogRecord): Promise<DisputeRecord | undefined> {
    const mark = placementIn(record)!
    await this.#o.registry.disputeGate.until(mark)
    const d = this.#o.registry.dispute(mark.sourceId, mark.disputeId)
    return d !== undefined && d.state === 'accepted' && d.after_seq === record.seq ? d : undefined
  }

  /** Signs the tree's current size, persists the checkpoint, then publishes it. */
  async #sign(): Promise<void> {
    const size = this.#tree.size
    const root = this.#tree.root(size)
    const signers = await this.#o.keys.signers()
    const note = signNote(checkpointText(this.#o.origin, size, root), signers)
    const row: CheckpointRow = { size, root: root.toString('base64'), note, key_ids: signers.map((s) => s.keyId) }
    this.#checkHeld()
    await this.#o.store.writeCheckpoint(row)
    this.#checkpoint = row
    this.#lastCheckpointAt = performance.now()
    this.#o.onCheckpoint?.(row)
  }
}
