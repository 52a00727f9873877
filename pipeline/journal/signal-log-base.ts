/**
 * Lifecycle and argument rules every `SignalLog` adapter shares, written once: open is
 * idempotent, close waits for operations in flight and is safe to call twice, nothing
 * is accepted after close, and arguments are checked the same way whatever the
 * backend. Adapters fill in the `on*` hooks, which only ever run on an open log with
 * validated arguments. Backend-agnostic on purpose (imports only the contract and the
 * error type) so the JetStream adapter can extend it too.
 */
import { MAX_FETCH_RECORDS, MAX_FETCH_WAIT_MS } from '../log.js'
import type { AppendOptions, AppendResult, ConsumeOptions, ConsumerInfo, ConsumerOptions, FetchResult, LogConsumer, LogInfo, LogRecord, ReadStart, SignalLog } from '../log.js'
import { LogError } from '../log-error.js'

/** Consumer names end up in file names and NATS subjects: keep them to a safe set. */
const CONSUMER_NAME = /^[A-Za-z0-9_-]{1,64}$/
/** A source id is one NATS subject token (`signals.<sourceId>`). */
const SOURCE_ID = /^[A-Za-z0-9_-]{1,128}$/

type State = 'idle' | 'opening' | 'open' | 'closing' | 'closed'

export abstract class SignalLogBase implements SignalLog {
  #state: State = 'idle'
  #opening: Promise<void> | undefined
  #closing: Promise<void> | undefined
  #opened = false
  /** Operations under way: close waits for them. A count, not a set, so the hot path allocates no hash-table entries. */
  #inflight = 0
  #settled: (() => void) | undefined

  protected abstract onOpen(): Promise<void>
  /** `sourceId` is '' when none was named. */
  protected abstract onAppend(dedupId: string, data: Uint8Array, sourceId: string): Promise<AppendResult>
  protected abstract onRead(start: ReadStart, max: number): Promise<LogRecord[]>
  protected abstract onInfo(): Promise<LogInfo>
  /** `sourceId` null for every record; `startSeq` at least 1. */
  protected abstract onConsumer(name: string, sourceId: string | null, startSeq: number): Promise<LogConsumer>
  protected abstract onConsumerInfo(name: string): Promise<ConsumerInfo | null>
  protected abstract onConsumers(): Promise<ConsumerInfo[]>
  protected abstract onDeleteConsumer(name: string): Promise<boolean>
  protected abstract onSync(): Promise<void>
  /**
   * Runs when close begins, before it waits for operations in flight: waiting fetches
   * must end here, or close would wait for them until they expire.
   */
  protected abstract onClosing(): void
  /** Runs once, after every operation in flight has settled. */
  protected abstract onClose(): Promise<void>

  open(): Promise<void> {
    switch (this.#state) {
      case 'open':
        return Promise.resolve()
      case 'opening':
        return this.#opening!
      case 'closing':
      case 'closed':
        return Promise.reject(new LogError('log_closed', 'signal log is closed'))
      case 'idle':
        break
    }
    this.#state = 'opening'
    this.#opening = this.onOpen().then(
      () => {
        this.#opened = true
        if (this.#state === 'opening') this.#state = 'open'
      },
      (err: unknown) => {
        // A failed open leaves nothing behind (the hook cleans up), so it may be retried.
        if (this.#state === 'opening') this.#state = 'idle'
        this.#opening = undefined
        throw err
      },
    )
    return this.#opening
  }

  append(dedupId: string, data: Uint8Array, options?: AppendOptions): Promise<AppendResult> {
    return this.#run(() => {
      if (typeof dedupId !== 'string') throw invalid('dedup id must be a string')
      if (!(data instanceof Uint8Array)) throw invalid('data must be a Uint8Array')
      const { sourceId } = checkOptions<AppendOptions>(options, ['sourceId'], 'append options')
      return this.onAppend(dedupId, data, sourceId === undefined ? '' : checkSourceId(sourceId))
    })
  }

  read(start: ReadStart, max: number): Promise<LogRecord[]> {
    return this.#run(() => {
      const from = checkStart(start)
      if (!Number.isSafeInteger(max) || max < 0) throw invalid('max must be a non-negative integer')
      if (max === 0) return Promise.resolve([])
      return this.onRead(from, max)
    })
  }

  info(): Promise<LogInfo> {
    return this.#run(() => this.onInfo())
  }

  consumer(name: string, options?: ConsumerOptions): Promise<LogConsumer> {
    return this.#run(() => {
      checkConsumerName(name)
      const { sourceId, startSeq } = checkOptions<ConsumerOptions>(options, ['sourceId', 'startSeq'], 'consumer options')
      if (startSeq !== undefined && (!Number.isSafeInteger(startSeq) || startSeq < 1)) throw invalid('consumer option startSeq must be an integer of at least 1')
      return this.onConsumer(name, sourceId === undefined ? null : checkSourceId(sourceId), startSeq ?? 1)
    })
  }

  consumerInfo(name: string): Promise<ConsumerInfo | null> {
    return this.#run(() => this.onConsumerInfo(checkConsumerName(name)))
  }

  consumers(): Promise<ConsumerInfo[]> {
    return this.#run(() => this.onConsumers())
  }

  deleteConsumer(name: string): Promise<boolean> {
    return this.#run(() => this.onDeleteConsumer(checkConsumerName(name)))
  }

  sync(): Promise<void> {
    return this.#run(() => this.onSync())
  }

  close(): Promise<void> {
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    const opening = this.#opening
    this.#state = 'closing'
    if (opening !== undefined) await opening.catch(() => undefined)
    if (this.#opened) this.onClosing()
    // Appends already accepted finish (and become durable) before the files close.
    if (this.#inflight > 0) await new Promise<void>((resolve) => (this.#settled = resolve))
    try {
      if (this.#opened) await this.onClose()
    } finally {
      this.#state = 'closed'
    }
  }

  /** For adapters' consumers: runs `op` as an operation of the log (refused once closing, waited for by close). */
  protected run<T>(op: () => Promise<T>): Promise<T> {
    return this.#run(op)
  }

  #run<T>(op: () => Promise<T>): Promise<T> {
    if (this.#state !== 'open') {
      return Promise.reject(new LogError('log_closed', this.#state === 'idle' || this.#state === 'opening'
        ? 'signal log is not open'
        : 'signal log is closed'))
    }
    let p: Promise<T>
    try {
      p = op()
    } catch (err) {
      return Promise.reject(err)
    }
    this.#inflight++
    p.then(this.#done, this.#done)
    return p
  }

  readonly #done = (): void => {
    if (--this.#inflight === 0) this.#settled?.()
  }
}

function invalid(message: string): LogError {
  return new LogError('invalid_argument', message)
}

/** A closed options object: an unknown key is a typo, never silently ignored. */
function checkOptions<T extends object>(options: T | undefined, known: readonly string[], what: string): Partial<T> {
  if (options === undefined) return {}
  if (typeof options !== 'object' || options === null) throw invalid(`${what} must be an object`)
  for (const key of Object.keys(options)) if (!known.includes(key)) throw invalid(`unknown ${what.replace(/s$/, '')} "${key}"; known: ${known.join(', ')}`)
  return options
}

function checkSourceId(sourceId: unknown): string {
  if (typeof sourceId !== 'string' || !SOURCE_ID.test(sourceId)) throw invalid('source id must be 1 to 128 of [A-Za-z0-9_-]')
  return sourceId
}

/** The contract's rules for `LogConsumer.fetch` arguments, shared by every adapter. */
export function checkFetchArgs(max: number, expiresMs: number, signal: AbortSignal | undefined): void {
  if (!Number.isSafeInteger(max) || max < 1 || max > MAX_FETCH_RECORDS) throw invalid(`fetch max must be an integer from 1 to ${MAX_FETCH_RECORDS}`)
  if (!Number.isSafeInteger(expiresMs) || expiresMs < 0 || expiresMs > MAX_FETCH_WAIT_MS) throw invalid(`fetch expiresMs must be an integer from 0 to ${MAX_FETCH_WAIT_MS}`)
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalid('fetch signal must be an AbortSignal')
}

/** The contract's rule for `LogConsumer.ack`'s seq, shared by every adapter. */
export function checkAckSeq(seq: number): void {
  if (!Number.isSafeInteger(seq) || seq < 0) throw invalid('ack seq must be a non-negative integer')
}

/** `LogConsumer.consume` for any adapter: a fetch loop yielding what is not empty. */
export async function* consumeBatches(consumer: LogConsumer, options: ConsumeOptions = {}): AsyncGenerator<FetchResult> {
  const max = options.max ?? 256
  const expiresMs = options.expiresMs ?? 30_000
  checkFetchArgs(max, expiresMs, options.signal)
  for (;;) {
    if (options.signal?.aborted === true) return
    let batch: FetchResult
    try {
      batch = await consumer.fetch(max, expiresMs, options.signal)
    } catch (err) {
      // The consumer or the log closed: the iteration ends, as it does on abort.
      if (err instanceof LogError && err.code === 'log_closed') return
      throw err
    }
    if (batch.records.length > 0 || batch.lost !== null) yield batch
  }
}

function checkConsumerName(name: string): string {
  if (typeof name !== 'string' || !CONSUMER_NAME.test(name)) {
    throw invalid('consumer name must match [A-Za-z0-9_-]{1,64}')
  }
  return name
}

function checkStart(start: ReadStart): ReadStart {
  if (typeof start !== 'object' || start === null) throw invalid('read start must be { fromSeq } or { fromTime }')
  const hasSeq = 'fromSeq' in start
  const hasTime = 'fromTime' in start
  if (hasSeq === hasTime) throw invalid('read start must have exactly one of fromSeq and fromTime')
  const value = hasSeq ? start.fromSeq : (start as { fromTime: number }).fromTime
  if (!Number.isSafeInteger(value) || value < 0) throw invalid('read start must be a non-negative integer')
  return hasSeq ? { fromSeq: value } : { fromTime: value }
}
