import { AckPolicy, DeliverPolicy, type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream'
import { createInbox, nanos, nuid, type NatsConnection, type Status } from '@nats-io/transport-node'
import { KvError, type KvEntry } from '../kv-store.js'
import { toKvError } from './nats-kv-errors.js'

/** The KV-Operation header the NATS KV client writes on a deletion (`DEL`) or purge (`PURGE`). */
const OPERATION_HEADER = 'KV-Operation'
/** Waits between attempts to recreate a lost consumer: from the first, doubling to the last. */
const RETRY_FIRST_MS = 50
const RETRY_MAX_MS = 1000
/**
 * The server's heartbeat to an idle consumer; two missed ones (a consumer the server lost
 * or deleted without a reconnect of this client: a cluster's stream leader gone) make the
 * feed recreate it. The client's ordered consumer uses 30 s, which leaves a watch silent
 * for a minute.
 */
const HEARTBEAT_MS = 1000
/** A consumer whose client is gone is deleted by the server after this. */
const INACTIVE_MS = 60_000

export interface KvFeedHandlers {
  /**
   * A key's last change at the start (a `last_values` feed only): its value, or the
   * deletion of a key deleted before the start (which a watch leaves out and an index
   * counts as passed).
   */
  current(entry: KvEntry): void
  /** Every current value was handed over (at once for `updates_only`). */
  currentDone(): void
  /** A change after the start, in revision order; deletions included. */
  change(entry: KvEntry): void
  /** The feed stopped for good (the connection closed); not called after `stop()`. */
  failed(err: KvError): void
}

export interface KvFeedOptions {
  readonly nc: NatsConnection
  readonly js: JetStreamClient
  readonly bucket: string
  /** One key, a `prefix.>`, or undefined for every key. */
  readonly key: string | undefined
  readonly include: 'last_values' | 'updates_only'
  /**
   * For `updates_only`: the changes after this revision (what the caller knows of the
   * bucket when it asks), so a change made between the ask and the consumer's creation
   * is not lost. Without it, the changes after the consumer's creation.
   */
  readonly after?: number
  /** Leaves the values out (the server sends the headers only): for an index of keys. */
  readonly headersOnly?: boolean
}

/**
 * The changes of one KV bucket, from a push consumer of its stream (no acks, flow
 * control, in memory): the current value of each key first (the server's "last per
 * subject", in stream order), then every change. The consumer is recreated, from the
 * revision after the last one handed on, whenever it may have been lost: on every
 * reconnect of the client (a restarted server forgot it), on two missed heartbeats, and
 * on a gap in its delivery sequence. That resumption loses nothing because the bucket
 * keeps one message per key (history 1) and never removes a deletion marker: every key
 * changed since that revision still has its latest change in the stream, at a later
 * sequence. Messages at or below the last revision handed on (an overlap of the old and
 * the new consumer) are dropped, so each change comes once.
 */
export class KvFeed {
  readonly #options: KvFeedOptions
  readonly #handlers: KvFeedHandlers
  readonly #prefix: string
  /** The last revision handed on. */
  #position = 0
  /** Messages of the start still to come (current values and deletion markers), or undefined once the start is over. */
  #startLeft: number | undefined
  /** The first consumer was created: later ones start after the position. */
  #begun = false
  /** The current consumer's name, and the delivery sequence it last delivered. */
  #consumer: string | undefined
  #delivered = 0
  #messages: ConsumerMessages | undefined
  #jsm: JetStreamManager | undefined
  #statuses: { stop?: () => void } | undefined
  #stopped = false
  /** Bumped on every (re)creation: a message of an older consumer is dropped. */
  #generation = 0
  /** currentDone was called. */
  #ended = false
  #retryMs = RETRY_FIRST_MS
  #retryTimer: NodeJS.Timeout | undefined
  #ready: () => void = () => undefined
  /** Resolves once the first consumer exists (its creation may have to be retried). */
  readonly started: Promise<void>

  constructor(options: KvFeedOptions, handlers: KvFeedHandlers) {
    this.#options = options
    this.#handlers = handlers
    this.#prefix = `$KV.${options.bucket}.`
    this.started = new Promise((resolve) => (this.#ready = resolve))
    void this.#watchConnection()
    void this.#open()
  }

  /** The last revision handed on (0 before any). */
  get position(): number {
    return this.#position
  }

  stop(): void {
    if (this.#stopped) return
    this.#stopped = true
    this.#statuses?.stop?.()
    clearTimeout(this.#retryTimer)
    this.#ready()
    this.#dropConsumer()
  }

  async #watchConnection(): Promise<void> {
    // Typed as a plain iterable; the client's has stop(), which unregisters it (else every stopped watch would leave one).
    const statuses = this.#options.nc.status() as AsyncIterable<Status> & { stop?: () => void }
    this.#statuses = statuses
    if (this.#stopped) statuses.stop?.()
    for await (const s of statuses) {
      if (this.#stopped) return
      if (s.type === 'reconnect') this.#reopen()
    }
    // The status iterator ends when the connection closes for good.
    if (!this.#stopped) {
      this.stop()
      this.#handlers.failed(new KvError('closed', `a watch of kv bucket ${this.#options.bucket} lost its NATS connection for good`))
    }
  }

  /** Two heartbeats missed: the server lost or deleted the consumer (it says nothing when it does); recreate it. */
  async #watchConsumer(messages: ConsumerMessages, generation: number): Promise<void> {
    for await (const s of messages.status()) {
      if (generation !== this.#generation) return
      if (s.type === 'heartbeats_missed' || s.type === 'consumer_deleted') {
        this.#reopen()
        return
      }
    }
  }

  #reopen(): void {
    if (this.#stopped) return
    clearTimeout(this.#retryTimer)
    this.#retryTimer = undefined
    this.#dropConsumer()
    // A consumer lost during the start: what follows are changes, deletions included.
    if (this.#begun && !this.#ended) this.#endStart()
    void this.#open()
  }

  #dropConsumer(): void {
    this.#generation++
    this.#messages?.stop()
    this.#messages = undefined
    // Best effort: a consumer the server still has would push to an inbox nobody reads until its inactivity threshold.
    if (this.#consumer !== undefined) this.#jsm?.consumers.delete(`KV_${this.#options.bucket}`, this.#consumer).catch(() => undefined)
    this.#consumer = undefined
  }

  async #open(): Promise<void> {
    const generation = ++this.#generation
    const { js, bucket, key, include, headersOnly, after } = this.#options
    const stream = `KV_${bucket}`
    const first = !this.#begun
    const fromSequence = !first || (include === 'updates_only' && after !== undefined)
    const name = `kv_watch_${nuid.next()}`
    const deliver = createInbox()
    try {
      this.#jsm ??= await js.jetstreamManager()
      const info = await this.#jsm.consumers.add(stream, {
        name,
        deliver_subject: deliver,
        filter_subject: `${this.#prefix}${key ?? '>'}`,
        ...(fromSequence
          ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: (first ? (after as number) : this.#position) + 1 }
          : { deliver_policy: include === 'updates_only' ? DeliverPolicy.New : DeliverPolicy.LastPerSubject }),
        ack_policy: AckPolicy.None,
        flow_control: true,
        idle_heartbeat: nanos(HEARTBEAT_MS),
        headers_only: headersOnly === true,
        inactive_threshold: nanos(INACTIVE_MS),
        num_replicas: 1,
        mem_storage: true,
      })
      if (this.#stopped || generation !== this.#generation) {
        await this.#jsm.consumers.delete(stream, name).catch(() => undefined)
        return
      }
      this.#consumer = name
      this.#delivered = 0
      if (first) {
        this.#begun = true
        // The creation's own answer: its pending count and position are those of that moment.
        // An updates_only consumer starts after `after`, or the stream's last sequence then.
        if (include === 'updates_only') this.#position = after ?? info.delivered.stream_seq
        else this.#startLeft = info.num_pending
        if (this.#startLeft === 0 || include === 'updates_only') this.#endStart()
      }
      const consumer = await js.consumers.getBoundPushConsumer({ deliver_subject: deliver, idle_heartbeat: nanos(HEARTBEAT_MS) })
      const messages = await consumer.consume({ callback: (m) => this.#take(m, generation) })
      if (this.#stopped || generation !== this.#generation) {
        // Stopped or replaced while subscribing: #dropConsumer ran before there was anything to stop.
        messages.stop()
        await this.#jsm.consumers.delete(stream, name).catch(() => undefined)
        return
      }
      this.#messages = messages
      void this.#watchConsumer(messages, generation)
      this.#retryMs = RETRY_FIRST_MS
      this.#ready()
    } catch (err) {
      if (this.#stopped || generation !== this.#generation) return
      const failure = toKvError(err, `watch of kv bucket ${bucket}`)
      if (failure.code === 'closed') {
        this.stop()
        this.#handlers.failed(failure)
        return
      }
      // JetStream not ready yet (a server starting, a leader being elected): try again.
      this.#retryTimer = setTimeout(() => void this.#open(), this.#retryMs)
      this.#retryMs = Math.min(RETRY_MAX_MS, this.#retryMs * 2)
    }
  }

  #take(m: JsMsg, generation: number): void {
    if (generation !== this.#generation || this.#stopped) return
    // A message lost between the server and here (a slow-consumer drop): start again after the last one taken.
    if (m.info.deliverySequence !== this.#delivered + 1) {
      this.#reopen()
      return
    }
    this.#delivered = m.info.deliverySequence
    if (m.seq <= this.#position) return
    this.#position = m.seq
    const operation = m.headers?.get(OPERATION_HEADER)
    const deleted = operation === 'DEL' || operation === 'PURGE'
    const entry: KvEntry = {
      bucket: this.#options.bucket,
      key: m.subject.slice(this.#prefix.length),
      value: deleted || this.#options.headersOnly === true ? new Uint8Array(0) : m.data,
      revision: m.seq,
      created: m.time.getTime(),
      operation: deleted ? 'DEL' : 'PUT',
    }
    if (this.#startLeft === undefined) {
      this.#handlers.change(entry)
      return
    }
    this.#handlers.current(entry)
    if (--this.#startLeft === 0) this.#endStart()
  }

  #endStart(): void {
    if (this.#ended) return
    this.#ended = true
    this.#startLeft = undefined
    this.#handlers.currentDone()
  }
}
