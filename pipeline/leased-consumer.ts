/**
 * A durable consumer pulled by one process of the cluster at a time. Two processes
 * pulling one AckPolicy.All consumer lose records: the second one's ack of seq 100
 * acknowledges the first one's unprocessed 1..50. So the consumer is opened only under a
 * lease on the key-value port (`storage/kv-lease.ts`, key `lease.consumer.<name>` by
 * default), and used only while the lease holds:
 *
 * - `refuse` (a process that must be the only one, the recorder): another live holder is
 *   an error `consumer_held` naming it; a dead holder's lease is taken once it lapses.
 * - `wait` (a standby): waits until the holder releases the lease or lets it lapse, then
 *   opens the consumer, which resumes from the last acknowledgement.
 * - Every fetch and ack first checks the lease on this process's clock, and the moment the
 *   lease is lost (taken over, or not renewed for two thirds of the lease time) the
 *   consumer is closed: nothing is pulled or acknowledged after it, and records fetched
 *   but not yet handed over are dropped (`lease_lost`), for the next holder hands them out
 *   again from the acknowledged position.
 * - A fetch waits at most until the lease's validity runs out, so a pull request this
 *   holder left on the server (a process frozen with its connection open) has expired
 *   before another holder can take over and never takes that holder's records.
 * - `close()` closes the consumer (acks under way finish), then releases the lease, so a
 *   standby takes over at once.
 */
import { hostname } from 'node:os'
import { KvLease, type KvBucket, type LeaseLoss, type LeaseMode } from '../storage/index.js'
import type { ConsumeOptions, ConsumerOptions, FetchResult, LogConsumer, SignalLog } from './log.js'
import { ConsumerHeldError, LogError } from './log-error.js'
import { consumeBatches } from './journal/signal-log-base.js'

/** The default lease time: a dead holder's consumer is taken over this long after its last renewal. */
export const CONSUMER_LEASE_MS = 15_000

export interface ConsumerLeaseOptions {
  readonly mode: LeaseMode
  /** Default CONSUMER_LEASE_MS. */
  readonly leaseMs?: number
  /**
   * The name other processes are told in `consumer_held`; default `<host name>/<pid>/<n>`,
   * n counting the leased consumers this process opened, so no two holders share a name
   * (a key naming this very holder would be taken back at once).
   */
  readonly holderId?: string
  /** The lease's key in the bucket; default `lease.consumer.<name>`. */
  readonly key?: string
  /** Called once when the lease is lost, after the consumer was closed. */
  readonly onLost?: (loss: LeaseLoss) => void
  /** Renewals and watches that failed; the lease survives them until its validity runs out. */
  readonly onError?: (err: unknown) => void
  /** A monotonic clock in ms (performance.now by default). */
  readonly now?: () => number
  /** Ends a wait for the lease (`wait` mode): the open rejects with the signal's reason. */
  readonly signal?: AbortSignal
}

export interface LeasedConsumer extends LogConsumer {
  readonly holderId: string
  /** Whether this process holds the consumer's lease now. */
  holds(): boolean
}

let opened = 0

export function defaultHolderId(): string {
  return `${hostname()}/${process.pid}/${++opened}`
}

/** Opens the durable consumer `name` of `log` once this process holds its lease in `bucket`. */
export async function openLeasedConsumer(log: SignalLog, bucket: KvBucket, name: string, options: ConsumerOptions | undefined, lease: ConsumerLeaseOptions): Promise<LeasedConsumer> {
  let consumer: Leased | undefined
  let lostFirst: LeaseLoss | undefined
  const kv = new KvLease({
    bucket,
    key: lease.key ?? `lease.consumer.${name}`,
    holderId: lease.holderId ?? defaultHolderId(),
    leaseMs: lease.leaseMs ?? CONSUMER_LEASE_MS,
    ...(lease.now !== undefined && { now: lease.now }),
    ...(lease.onError !== undefined && { onError: lease.onError }),
    onLost: (loss) => {
      if (consumer === undefined) lostFirst = loss
      else consumer.lost(loss)
    },
  })
  const stop = () => void kv.release()
  lease.signal?.throwIfAborted()
  lease.signal?.addEventListener('abort', stop, { once: true })
  let acquired: Awaited<ReturnType<KvLease['acquire']>>
  try {
    acquired = await kv.acquire(lease.mode)
  } catch (err) {
    lease.signal?.throwIfAborted()
    throw err
  } finally {
    lease.signal?.removeEventListener('abort', stop)
  }
  if (!acquired.held) throw new ConsumerHeldError(name, acquired.holder)
  let inner: LogConsumer
  try {
    inner = await log.consumer(name, options)
  } catch (err) {
    await kv.release()
    throw err
  }
  consumer = new Leased(inner, kv, lease.onLost)
  if (lostFirst !== undefined || !kv.holds()) consumer.lost(lostFirst ?? { reason: 'expired', holder: null })
  return consumer
}

class Leased implements LeasedConsumer {
  readonly name: string
  readonly sourceId: string | null
  readonly holderId: string
  readonly #inner: LogConsumer
  readonly #lease: KvLease
  readonly #onLost: ((loss: LeaseLoss) => void) | undefined
  #loss: LeaseLoss | undefined
  #closed = false

  constructor(inner: LogConsumer, lease: KvLease, onLost: ((loss: LeaseLoss) => void) | undefined) {
    this.#inner = inner
    this.#lease = lease
    this.#onLost = onLost
    this.name = inner.name
    this.sourceId = inner.sourceId
    this.holderId = lease.holderId
  }

  holds(): boolean {
    return this.#loss === undefined && this.#lease.holds()
  }

  /** The lease is gone: stop pulling and acking now. */
  lost(loss: LeaseLoss): void {
    if (this.#loss !== undefined || this.#closed) return
    this.#loss = loss
    void this.#inner.close()
    void this.#lease.release()
    this.#onLost?.(loss)
  }

  #check(): void {
    if (this.#closed) throw new LogError('log_closed', `consumer ${this.name} is closed`)
    if (this.holds()) return
    if (this.#loss === undefined) this.lost({ reason: 'expired', holder: null })
    const holder = this.#loss!.holder
    throw new LogError('lease_lost', `consumer ${this.name}: the lease was ${this.#loss!.reason === 'taken' ? `taken by ${holder ?? 'another process'}` : 'not renewed in time'}; this process no longer pulls it`)
  }

  async fetch(max: number, expiresMs: number, signal?: AbortSignal): Promise<FetchResult> {
    this.#check()
    const left = Math.floor(this.#lease.validForMs())
    const result = await this.#inner.fetch(max, Number.isSafeInteger(expiresMs) ? Math.min(expiresMs, left) : expiresMs, signal)
    this.#check()
    return result
  }

  ack(seq: number): Promise<void> {
    try {
      this.#check()
    } catch (err) {
      return Promise.reject(err)
    }
    return this.#inner.ack(seq)
  }

  nak(): void {
    this.#inner.nak()
  }

  position(): number {
    return this.#inner.position()
  }

  consume(options?: ConsumeOptions): AsyncIterable<FetchResult> {
    return consumeBatches(this, options)
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#inner.close()
    await this.#lease.release()
  }
}
