import { setTimeout as sleep } from 'node:timers/promises'
import { isLogError, isTransientLogError, MAX_FETCH_RECORDS, type LogConsumer, type LogRecord, type LostRange } from '../pipeline/index.js'
import { isReceiptStoreError, RECORD_BATCH_MAX, type ReceiptInput } from '../receipts/index.js'
import { Backoff } from './backoff.js'
import { DisputeSync } from './dispute-sync.js'
import { mapRecord } from './receipt-input.js'
import type { RecorderCounts, RecorderOptions, RecorderState, RecorderStatus } from './recorder-options.js'
import { endSpan, startSpan, tracingOn, type Span } from '../tracing/index.js'

/** How long one fetch waits for an append while idle; close ends the wait at once. */
const IDLE_WAIT_MS = 30_000

/** A record of a source the registry does not know yet: wait for it, within the grace. */
class UnknownSource extends Error {
  constructor(sourceId: string) {
    super(`source ${sourceId} is not in the registry (yet)`)
    this.name = 'UnknownSource'
  }
}

const transient = (err: unknown): boolean =>
  err instanceof UnknownSource || (isReceiptStoreError(err) && err.transient) || isTransientLogError(err)

const describe = (err: unknown): string => (err instanceof Error ? `${(err as { code?: string }).code ?? err.name}: ${err.message}` : String(err))

/**
 * The recorder: a durable consumer (`recorder`) of the signal log that writes a receipt
 * for every record, test signals included (marked test), and acknowledges its position
 * only after the store confirmed the write.
 *
 * Exactly once: a receipt's id is its (source_id, signal_id) and the store writes none
 * it holds already, so the records handed out again after a failed write (nak), after a
 * crash between the write and the acknowledgement, or a signal_id accepted again after
 * the dedup window, never make a second receipt.
 *
 * A store error is retried for ever, with backoff: a transient one (ClickHouse down,
 * slow, overloaded) from a short wait doubling up to the cap; any other at the cap
 * from the start, logged as an error each time. No record is ever skipped for a store
 * error: the log holds every 202'd signal, an operator's fix (space, permissions, a
 * newer release) is usually what ends a "permanent" error, and skipping would lose
 * receipts for good. Meanwhile ingest is untouched: it only appends to the log.
 */
export class Recorder {
  readonly #o: RecorderOptions
  readonly #now: () => number
  readonly #batchMax: number
  readonly #flushMs: number
  readonly #disputes: DisputeSync
  readonly #stopper = new AbortController()
  #consumer: LogConsumer | undefined
  #running: Promise<void> | undefined
  #closing = false
  #destroyed = false
  #stopped = false
  #retrying = false
  #lastError: string | undefined
  /** `time` of the first record of the batch not yet acknowledged. */
  #oldestPending: number | undefined
  /**
   * Records up to this seq may already be in the store, written by a previous holder of the
   * consumer or by a failed attempt of this one: a batch reaching into them is verified
   * (every id looked up, in the look-up and in the receipts themselves). Above it, only a
   * signal_id accepted again can find a receipt, and the store's filter of recorded ids
   * finds those. Set at the first batch after the take-over (see there).
   */
  #mayBeWrittenThrough: number | undefined
  /** Highest seq reported lost: a nak hands the same loss out again. */
  #lostThrough = 0
  #unknownSince: number | undefined
  #disputesDirty = true
  #disputesWaiting = false
  #wakeDisputes: (() => void) | undefined
  #unwatch: (() => void) | undefined
  #counts = { recorded: 0, alreadyRecorded: 0, batchesOk: 0, batchesRetried: 0, lostRecords: 0, undecodableRecords: 0, unknownSourceRecords: 0, disputeFailures: 0 }

  constructor(options: RecorderOptions) {
    const batchMax = options.batchMax ?? 5000
    if (!Number.isSafeInteger(batchMax) || batchMax < 1 || batchMax > RECORD_BATCH_MAX) throw new RangeError(`recorder: batchMax must be 1 to ${RECORD_BATCH_MAX}`)
    this.#o = options
    this.#now = options.now ?? Date.now
    this.#batchMax = batchMax
    this.#flushMs = options.flushMs ?? 500
    this.#disputes = new DisputeSync(options.registry, options.store, (d, signalId) =>
      options.logger.warn({ dispute_id: d.dispute_id, source_id: d.source_id, signal_id: signalId }, 'recorder: a disputed signal has no receipt (retention removed it before it was recorded); its status is not shown'),
    )
  }

  /** Starts consuming; returns at once. */
  start(): void {
    this.#running ??= this.#run().catch((err: unknown) => {
      this.#o.logger.error({ err }, 'recorder stopped on an unexpected error; receipts wait for a restart')
    })
  }

  status(): RecorderStatus {
    const lag = this.#lagRecords()
    const state: RecorderState =
      this.#stopped || this.#closing ? 'stopped' : this.#consumer === undefined ? (this.#o.standby === true ? 'standby' : 'starting') : this.#retrying ? 'retrying' : lag === 0 ? 'caught_up' : 'running'
    const oldest = this.#oldestPending
    return {
      state,
      lag_records: lag,
      lag_seconds: lag === 0 || oldest === undefined ? 0 : Math.max(0, Math.round((this.#now() - oldest) / 100) / 10),
      disputes_pending: this.#disputes.pending(),
      ...(this.#retrying && this.#lastError !== undefined ? { last_error: this.#lastError } : {}),
    }
  }

  counts(): RecorderCounts {
    return { ...this.#counts }
  }

  /** Finishes the batch in flight (its write and acknowledgement; no further retry), then stops. Safe to call twice. */
  async close(): Promise<void> {
    this.#beginStop()
    await this.#running
    await this.#consumer?.close()
    this.#stopped = true
  }

  /** Stops now: a write in flight is not acknowledged, so its records are handed out again at the next start (and are not recorded twice). */
  async destroy(): Promise<void> {
    this.#destroyed = true
    this.#beginStop()
    await this.#consumer?.close()
    this.#stopped = true
  }

  #beginStop(): void {
    this.#closing = true
    this.#stopper.abort()
    this.#unwatch?.()
    this.#wakeDisputes?.()
  }

  #lagRecords(): number {
    // A standby records nothing: the lag is the holder's to report.
    if (this.#consumer === undefined && this.#o.standby === true) return 0
    return Math.max(0, this.#o.lastSeq() - (this.#consumer?.position() ?? 0))
  }

  async #pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.#stopper.signal }).catch(() => undefined)
  }

  async #run(): Promise<void> {
    const backoff = new Backoff({ baseMs: this.#o.retryBaseMs ?? 100, maxMs: this.#o.retryMaxMs ?? 30_000 })
    let consumer: LogConsumer | undefined
    while (consumer === undefined) {
      if (this.#closing) return
      try {
        consumer = await (this.#o.openConsumer?.(this.#stopper.signal) ?? this.#o.log.consumer(this.#o.consumerName ?? 'recorder'))
      } catch (err) {
        if (isLogError(err, 'log_closed') || this.#closing) return
        this.#o.logger.error({ err }, 'recorder: cannot open its log consumer; retrying')
        await this.#pause(backoff.next(!transient(err)))
      }
    }
    backoff.reset()
    // Built after the take-over, so it knows what earlier holders wrote; until it is, the
    // store looks every id up.
    void this.#o.store.trackRecordedIds?.().catch((err: unknown) => {
      if (!this.#closing) this.#o.logger.warn({ err }, 'recorder: the filter of recorded ids was not built; every id is looked up')
    })
    this.#consumer = consumer
    if (this.#closing) return
    this.#unwatch = this.#o.registry.watchDisputes(() => this.#wake())
    const disputes = this.#disputeLoop(consumer)
    while (!this.#closing) {
      let records: LogRecord[]
      try {
        records = await this.#collect(consumer)
      } catch (err) {
        if (isLogError(err, 'log_closed') || this.#closing) break
        this.#failed(err, backoff, 'reading the log')
        await this.#pause(backoff.next(!transient(err)))
        continue
      }
      if (records.length === 0) continue
      // A trace of its own per batch: the log's records do not carry their requests' trace context.
      const span = tracingOn() ? startSpan('recorder.batch', { attributes: { 'sgw.records': records.length, 'sgw.log.first_seq': records[0]!.seq, 'sgw.log.last_seq': records[records.length - 1]!.seq } }) : undefined
      try {
        await this.#record(consumer, records, span)
        if (span !== undefined) endSpan(span)
        backoff.reset()
        this.#retrying = false
        this.#lastError = undefined
        if (this.#disputesWaiting) this.#wake()
      } catch (err) {
        if (span !== undefined) endSpan(span, 'batch_failed')
        consumer.nak()
        // The failed insert may have landed all the same (the answer was lost, not the write).
        this.#mayBeWrittenThrough = Math.max(this.#mayBeWrittenThrough ?? 0, records[records.length - 1]!.seq)
        if (this.#closing) break
        this.#counts.batchesRetried++
        this.#failed(err, backoff, `recording seqs ${records[0]!.seq} to ${records[records.length - 1]!.seq}`)
        await this.#pause(backoff.next(!transient(err)))
      }
    }
    await disputes
  }

  #failed(err: unknown, backoff: Backoff, what: string): void {
    this.#retrying = true
    this.#lastError = describe(err)
    const fields = { err, failures: backoff.failures + 1, lag_records: this.#lagRecords() }
    if (transient(err)) this.#o.logger.warn(fields, `recorder: ${what} failed; retrying with backoff, ingest is not affected`)
    else this.#o.logger.error(fields, `recorder: ${what} failed with an error a retry may not fix; retrying slowly, no record is skipped`)
  }

  /** Up to batchMax records: waits for the first, then up to flushMs for more. */
  async #collect(consumer: LogConsumer): Promise<LogRecord[]> {
    const records: LogRecord[] = []
    let deadline = Number.POSITIVE_INFINITY
    while (records.length < this.#batchMax && !this.#closing) {
      const wait = records.length === 0 ? IDLE_WAIT_MS : Math.max(0, Math.round(deadline - performance.now()))
      const got = await consumer.fetch(Math.min(MAX_FETCH_RECORDS, this.#batchMax - records.length), wait, this.#stopper.signal)
      if (got.lost !== null) this.#lost(got.lost)
      if (got.records.length === 0) {
        if (records.length > 0 || got.lost === null) break
        continue
      }
      if (records.length === 0) {
        deadline = performance.now() + this.#flushMs
        this.#oldestPending ??= got.records[0]!.time
      }
      for (const r of got.records) records.push(r)
      if (performance.now() >= deadline) break
    }
    return records
  }

  #lost(range: LostRange): void {
    if (range.toSeq <= this.#lostThrough) return
    const from = Math.max(range.fromSeq, this.#lostThrough + 1)
    this.#lostThrough = range.toSeq
    this.#counts.lostRecords += range.toSeq - from + 1
    this.#o.logger.error(
      { from_seq: from, to_seq: range.toSeq, count: range.toSeq - from + 1 },
      'recorder: the signal log removed these records (retention) before they were recorded: they have no receipt',
    )
  }

  /** One batch: receipts written, then the position acknowledged. Throws without acknowledging anything. */
  async #record(consumer: LogConsumer, records: readonly LogRecord[], span: Span | undefined): Promise<void> {
    // A holder acknowledges each batch before it fetches the next, so past the position
    // acknowledged when this one took the consumer, a previous holder (dead, or frozen with
    // a batch in hand) wrote at most one batch: at most RECORD_BATCH_MAX records from the
    // first one this holder is handed (retention removes the oldest records first, so a
    // gap comes before that batch, never inside it).
    this.#mayBeWrittenThrough ??= records[0]!.seq - 1 + RECORD_BATCH_MAX
    const inputs: ReceiptInput[] = []
    const undecodable: Array<{ seq: number; why: string }> = []
    let unknown: string[] = []
    for (const record of records) {
      const m = mapRecord(record, (id) => this.#o.registry.anySource(id)?.agent_id)
      if (m.kind === 'receipt') inputs.push(m.input)
      else if (m.kind === 'undecodable') undecodable.push({ seq: record.seq, why: m.why })
      else if (m.kind === 'not_a_signal') continue
      else {
        // Sources are never deleted, so in one process this is a journal written under
        // another registry; in a cluster, a source this process's registry has not yet
        // seen. Waiting a while covers the second; after that the receipt is recorded
        // without an agent rather than held back for ever or dropped.
        const now = this.#now()
        this.#unknownSince ??= now
        if (now - this.#unknownSince < (this.#o.unknownSourceGraceMs ?? 10_000)) throw new UnknownSource(m.sourceId)
        inputs.push(m.receipt(''))
        unknown.push(m.sourceId)
      }
    }
    if (inputs.length > 0) {
      // Idempotent and cheap once open: a store that could not be opened at start is opened here.
      await this.#o.store.open()
      const verify = records[0]!.seq <= this.#mayBeWrittenThrough
      const insert = span === undefined ? undefined : startSpan('receipt_store.insert', { parent: span, attributes: { 'sgw.receipts': inputs.length, 'sgw.receipts.verified': verify } })
      const result = await this.#o.store.record(inputs, { verify }).catch((err: unknown) => {
        if (insert !== undefined) endSpan(insert, 'insert_failed')
        throw err
      })
      if (insert !== undefined) {
        insert.setAttributes({ 'sgw.receipts.recorded': result.recorded, 'sgw.receipts.already_recorded': result.alreadyRecorded })
        endSpan(insert)
      }
      if (this.#destroyed) return
      this.#counts.recorded += result.recorded
      this.#counts.alreadyRecorded += result.alreadyRecorded
    }
    if (this.#destroyed) return
    await consumer.ack(records[records.length - 1]!.seq)
    this.#oldestPending = undefined
    this.#unknownSince = undefined
    this.#counts.batchesOk++
    this.#counts.undecodableRecords += undecodable.length
    for (const u of undecodable) this.#o.logger.error(u, 'recorder: a log record is not a signal record this release can read; it has no receipt')
    if (unknown.length > 0) {
      unknown = [...new Set(unknown)]
      this.#counts.unknownSourceRecords += inputs.filter((i) => i.agent_id === '').length
      this.#o.logger.warn({ source_ids: unknown.slice(0, 20) }, 'recorder: recorded receipts of sources the registry does not know, with an empty agent_id')
    }
  }

  #wake(): void {
    this.#disputesDirty = true
    const wake = this.#wakeDisputes
    this.#wakeDisputes = undefined
    wake?.()
  }

  /** Brings the receipts to the registry's disputes: at start, on each change, and after each batch while one waits for the recorder. */
  async #disputeLoop(consumer: LogConsumer): Promise<void> {
    const backoff = new Backoff({ baseMs: this.#o.retryBaseMs ?? 100, maxMs: this.#o.retryMaxMs ?? 30_000 })
    while (!this.#closing) {
      if (!this.#disputesDirty) {
        await new Promise<void>((resolve) => (this.#wakeDisputes = resolve))
        continue
      }
      this.#disputesDirty = false
      try {
        await this.#o.store.open()
        const through = consumer.position()
        const { waiting } = await this.#disputes.sync(through)
        this.#disputesWaiting = waiting > 0
        // A batch recorded while this pass ran may be the one a waiting dispute needs, and its
        // wake-up came before the flag above was set: without this the dispute would wait for
        // the next batch or registry change, which may never come.
        if (waiting > 0 && consumer.position() > through) this.#disputesDirty = true
        backoff.reset()
      } catch (err) {
        this.#disputesDirty = true
        if (this.#closing) break
        this.#counts.disputeFailures++
        const fields = { err, failures: backoff.failures + 1 }
        if (transient(err)) this.#o.logger.warn(fields, 'recorder: dispute statuses not written; retrying with backoff')
        else this.#o.logger.error(fields, 'recorder: dispute statuses not written, with an error a retry may not fix; retrying slowly')
        await this.#pause(backoff.next(!transient(err)))
      }
    }
  }
}
