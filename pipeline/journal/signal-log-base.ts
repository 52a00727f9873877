/**
 * Lifecycle and argument rules every `SignalLog` adapter shares, written once: open is
 * idempotent, close waits for operations in flight and is safe to call twice, nothing
 * is accepted after close, and arguments are checked the same way whatever the
 * backend. Adapters fill in the `on*` hooks, which only ever run on an open log with
 * validated arguments. Backend-agnostic on purpose (imports only the contract and the
 * error type) so the JetStream adapter can extend it too.
 */
import type { AppendResult, LogInfo, LogRecord, ReadStart, SignalLog } from '../log.js'
import { LogError } from '../log-error.js'

/** Consumer names end up in file names and NATS subjects: keep them to a safe set. */
const CONSUMER_NAME = /^[A-Za-z0-9_-]{1,64}$/

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
  protected abstract onAppend(dedupId: string, data: Uint8Array): Promise<AppendResult>
  protected abstract onRead(start: ReadStart, max: number): Promise<LogRecord[]>
  protected abstract onInfo(): LogInfo
  protected abstract onConsumerPosition(name: string): Promise<number>
  protected abstract onAck(name: string, seq: number): Promise<void>
  protected abstract onSync(): Promise<void>
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

  append(dedupId: string, data: Uint8Array): Promise<AppendResult> {
    return this.#run(() => {
      if (typeof dedupId !== 'string') throw invalid('dedup id must be a string')
      if (!(data instanceof Uint8Array)) throw invalid('data must be a Uint8Array')
      return this.onAppend(dedupId, data)
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

  info(): LogInfo {
    if (!this.#opened) return { firstSeq: 0, lastSeq: 0, records: 0, bytes: 0 }
    return this.onInfo()
  }

  consumerPosition(name: string): Promise<number> {
    return this.#run(() => this.onConsumerPosition(checkConsumerName(name)))
  }

  ack(name: string, seq: number): Promise<void> {
    return this.#run(() => {
      checkConsumerName(name)
      if (!Number.isSafeInteger(seq) || seq < 0) throw invalid('ack seq must be a non-negative integer')
      // Acking a record that does not exist yet is a consumer bug; storing it would
      // make the consumer skip that record once it is written.
      if (seq > this.onInfo().lastSeq) throw invalid(`ack seq ${seq} is past the end of the log`)
      return this.onAck(name, seq)
    })
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
    // Appends already accepted finish (and become durable) before the files close.
    if (this.#inflight > 0) await new Promise<void>((resolve) => (this.#settled = resolve))
    try {
      if (this.#opened) await this.onClose()
    } finally {
      this.#state = 'closed'
    }
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
