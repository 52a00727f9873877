/**
 * The signal log on NATS JetStream, behind the `SignalLog` contract of `../log.ts`: one
 * stream (stream-config.ts), appends published with the dedup id as `Nats-Msg-Id`, the
 * stream sequence as the log's seq, durable consumers as AckPolicy.All pull consumers
 * (jetstream-consumer.ts), reads through short-lived consumers (stream-reads.ts).
 *
 * Durability stance: an append resolves on the stream's publish ack, which on
 * nats-server 2.9 means the record is written to the OS by the stream leader and, for
 * replicas > 1, stored by a majority of the replicas; it is not fsynced (2.9 has no
 * `sync_interval`; the default flushes every 2 minutes). A killed process or server loses
 * nothing acknowledged; a power cut of every replica inside the flush interval can.
 * Durability on NATS is replication: run R3. `sync()` resolves once the last append
 * made has its ack: there is no fsync to ask for.
 *
 * Appends are pipelined: each is one publish awaiting its ack, with no stream info
 * request on the way, so many can be in flight on one connection. A timed-out append is
 * ambiguous (the server may have stored it): it rejects `unavailable`, and a retry with
 * the same dedup id is safe while the id is in the duplicate window.
 *
 * While the connection is down every call rejects `unavailable` at once rather than
 * queueing behind the reconnect: a queued publish would reach the server after its
 * caller was told it failed.
 *
 * One process pulls a durable consumer at a time: two pullers of one AckPolicy.All
 * consumer acknowledge each other's records (measured: records are lost). Opening a
 * name already open in this process is refused; across processes, open it through
 * `openLeasedConsumer` (../leased-consumer.ts), which holds a lease on the key-value port.
 */
import { AckPolicy, DeliverPolicy, jetstreamManager, ReplayPolicy } from '@nats-io/jetstream'
import type { ConsumerConfig, ConsumerInfo as NatsConsumerInfo, JetStreamClient, JetStreamManager, StreamConfig } from '@nats-io/jetstream'
import { connect, nanos } from '@nats-io/transport-node'
import type { NatsConnection, Status } from '@nats-io/transport-node'
import type { AppendResult, ConsumerInfo, LogConsumer, LogInfo, LogRecord, ReadStart } from '../log.js'
import { LogError } from '../log-error.js'
import { SignalLogBase } from '../journal/signal-log-base.js'
import { JetStreamConsumer } from './jetstream-consumer.js'
import type { JetStreamConsumerHost } from './jetstream-consumer.js'
import { API_CODE, apiCode, natsError, unavailable } from './nats-errors.js'
import { PullInbox } from './pull-inbox.js'
import { readStream } from './stream-reads.js'
import { sourceOf, streamConfig, subjectFor } from './stream-config.js'
import type { FilledJetStreamLogOptions } from './stream-config.js'

/** The contract's per-record limit, the journal's too. */
const MAX_RECORD_BYTES = 1024 * 1024
/** Room for the `NATS/1.0` header block around a dedup id. */
const HEADER_OVERHEAD = 64
/**
 * The server redelivers an unacknowledged record after this; the consumer drops such
 * redeliveries (it hands records out again itself, on `nak` and on reopen), so it only
 * bounds how long a dead puller's records stay pending. Long, so a slow batch is not
 * redelivered under its consumer's feet.
 */
const ACK_WAIT_MS = 10 * 60_000
/**
 * Records one consumer may hold handed out and unacknowledged; past it the server hands
 * out nothing more until an ack. Four full fetches of MAX_FETCH_RECORDS, and a bound on
 * what a consumer that never acks keeps in memory for `nak`.
 */
const MAX_ACK_PENDING = 16_384

interface Connected {
  readonly nc: NatsConnection
  readonly jsm: JetStreamManager
  readonly js: JetStreamClient
  readonly owned: boolean
  readonly open: Map<string, JetStreamConsumer | null>
  readonly status: AsyncIterator<Status>
  connected: boolean
  /** The last append made, settled or not: `sync` waits for it (acks arrive in publish order). */
  lastAppend: Promise<unknown>
}

export class JetStreamLog extends SignalLogBase {
  readonly #o: FilledJetStreamLogOptions
  #c: Connected | undefined

  constructor(opts: FilledJetStreamLogOptions) {
    super()
    this.#o = opts
  }

  protected override async onOpen(): Promise<void> {
    const o = this.#o
    let nc = o.connection
    const owned = nc === undefined
    try {
      nc ??= await connect({ servers: o.servers!, maxReconnectAttempts: -1 })
    } catch (err) {
      throw natsError('connecting', err)
    }
    try {
      const jsm = await jetstreamManager(nc, { timeout: o.requestTimeoutMs })
      await this.#ensureStream(jsm)
      const status = nc.status()[Symbol.asyncIterator]()
      const c: Connected = { nc, jsm, js: jsm.jetstream(), owned, open: new Map(), status, connected: true, lastAppend: Promise.resolve() }
      void this.#watch(c)
      this.#c = c
    } catch (err) {
      if (owned) await nc.close().catch(() => undefined)
      throw natsError('opening the stream', err)
    }
  }

  async #watch(c: Connected): Promise<void> {
    for (;;) {
      const next = await c.status.next().catch(() => ({ done: true as const, value: undefined }))
      if (next.done === true) return
      if (next.value.type === 'disconnect' || next.value.type === 'close') c.connected = false
      else if (next.value.type === 'reconnect') c.connected = true
    }
  }

  /** Creates the stream, or brings an existing one's limits to the options. */
  async #ensureStream(jsm: JetStreamManager): Promise<void> {
    const want = streamConfig(this.#o)
    let have: StreamConfig
    try {
      have = (await jsm.streams.info(want.name)).config
    } catch (err) {
      if (apiCode(err) !== API_CODE.StreamNotFound) throw err
      await jsm.streams.add(want)
      return
    }
    const keys = ['subjects', 'duplicate_window', 'max_age', 'max_bytes', 'num_replicas', 'allow_direct'] as const
    if (keys.some((k) => JSON.stringify(have[k]) !== JSON.stringify(want[k]))) await jsm.streams.update(want.name, { ...have, ...want })
  }

  #checkConnected(): void {
    if (this.#c?.connected !== true) throw unavailable('the server connection is down')
  }

  protected override onAppend(dedupId: string, data: Uint8Array, sourceId: string): Promise<AppendResult> {
    const c = this.#c!
    this.#checkConnected()
    const limit = Math.min(MAX_RECORD_BYTES, (c.nc.info?.max_payload ?? MAX_RECORD_BYTES) - HEADER_OVERHEAD - dedupId.length * 3)
    if (data.length > limit) {
      return Promise.reject(new LogError('record_too_large', `record of ${data.length} bytes exceeds the ${limit}-byte limit`))
    }
    const acked = c.js.publish(subjectFor(this.#o.subjectPrefix, sourceId), data, dedupId === ''
      ? { timeout: this.#o.requestTimeoutMs }
      : { msgID: dedupId, timeout: this.#o.requestTimeoutMs }).then(
      (ack) => ({ seq: ack.seq, duplicate: ack.duplicate }),
      (err: unknown) => { throw natsError('an append', err) },
    )
    c.lastAppend = acked
    return acked
  }

  protected override async onRead(start: ReadStart, max: number): Promise<LogRecord[]> {
    this.#checkConnected()
    const c = this.#c!
    try {
      return await readStream({ nc: c.nc, jsm: c.jsm, stream: this.#o.stream, subjectPrefix: this.#o.subjectPrefix, requestTimeoutMs: this.#o.requestTimeoutMs }, start, max)
    } catch (err) {
      throw natsError('a read', err)
    }
  }

  protected override async onInfo(): Promise<LogInfo> {
    this.#checkConnected()
    try {
      const s = (await this.#c!.jsm.streams.info(this.#o.stream)).state
      const empty = s.messages === 0
      return { firstSeq: empty ? 0 : s.first_seq, lastSeq: s.last_seq, records: s.messages, bytes: s.bytes }
    } catch (err) {
      throw natsError('stream info', err)
    }
  }

  /** The stream's first seq; the last seq + 1 when it holds nothing. */
  async #firstSeq(): Promise<number> {
    this.#checkConnected()
    try {
      const s = (await this.#c!.jsm.streams.info(this.#o.stream)).state
      return s.messages === 0 ? s.last_seq + 1 : s.first_seq
    } catch (err) {
      throw natsError('stream info', err)
    }
  }

  async #consumerInfo(name: string): Promise<NatsConsumerInfo | null> {
    this.#checkConnected()
    try {
      return await this.#c!.jsm.consumers.info(this.#o.stream, name)
    } catch (err) {
      if (apiCode(err) === API_CODE.ConsumerNotFound) return null
      throw natsError('consumer info', err)
    }
  }

  protected override async onConsumer(name: string, sourceId: string | null, startSeq: number): Promise<LogConsumer> {
    const c = this.#c!
    if (c.open.has(name)) throw new LogError('invalid_argument', `consumer ${name} is already open in this process; close it first`)
    // Claimed before the first await: two opens of one name cannot both pass the check.
    c.open.set(name, null)
    try {
      const filter = sourceId === null ? '' : subjectFor(this.#o.subjectPrefix, sourceId)
      let info = await this.#consumerInfo(name)
      if (info === null) {
        // A consumer created now starts at `startSeq`, or at the first record held if that is
        // later (what retention removed before it existed is no loss of its), and a start past
        // the end is the next record appended.
        const first = await this.#firstSeq()
        const last = (await c.jsm.streams.info(this.#o.stream)).state.last_seq
        info = await this.#create(name, filter, Math.min(Math.max(startSeq, first), last + 1))
      } else if ((info.config.filter_subject ?? '') !== filter) {
        throw new LogError('invalid_argument', `consumer ${name} exists with source filter ${JSON.stringify(sourceOfFilter(this.#o.subjectPrefix, info))}, not ${JSON.stringify(sourceId)}: a filter is part of a consumer's identity (delete it, or use another name)`)
      } else if (info.num_ack_pending > 0) {
        // Records handed out and never acknowledged (a restart, a crash): the server would
        // hand them out again only one by one after ack_wait. 2.9 has no consumer reset,
        // so the consumer is made again at its acknowledged position. A crash between the
        // two steps leaves no consumer: it is then made anew and starts at the first
        // record held, which hands records out again but loses none.
        const resume = ackSeqOf(info) + 1
        await this.#deleteOnServer(name)
        info = await this.#create(name, filter, resume)
      }
      const consumer = new JetStreamConsumer(this.#host, new PullInbox(c.nc, this.#o.stream, name, this.#o.subjectPrefix), name, sourceId, ackSeqOf(info))
      c.open.set(name, consumer)
      return consumer
    } catch (err) {
      if (c.open.get(name) === null) c.open.delete(name)
      throw natsError('opening a consumer', err)
    }
  }

  async #create(name: string, filter: string, startSeq: number): Promise<NatsConsumerInfo> {
    const config: Partial<ConsumerConfig> = {
      durable_name: name,
      ack_policy: AckPolicy.All,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: startSeq,
      replay_policy: ReplayPolicy.Instant,
      ack_wait: nanos(ACK_WAIT_MS),
      max_ack_pending: MAX_ACK_PENDING,
      ...(filter === '' ? {} : { filter_subject: filter }),
    }
    return this.#c!.jsm.consumers.add(this.#o.stream, config)
  }

  async #deleteOnServer(name: string): Promise<boolean> {
    try {
      return await this.#c!.jsm.consumers.delete(this.#o.stream, name)
    } catch (err) {
      if (apiCode(err) === API_CODE.ConsumerNotFound) return false
      throw err
    }
  }

  /** What the consumers use of the log. */
  readonly #host: JetStreamConsumerHost = {
    requestTimeoutMs: () => this.#o.requestTimeoutMs,
    firstSeq: () => this.#firstSeq(),
    scannedThrough: async (name) => {
      const info = await this.#consumerInfo(name)
      return info === null || info.num_ack_pending > 0 ? null : ackSeqOf(info)
    },
    ack: async (reply) => {
      try {
        await this.#c!.nc.request(reply, '+ACK', { timeout: this.#o.requestTimeoutMs })
      } catch (err) {
        throw natsError('an ack', err)
      }
    },
    checkConnected: () => this.#checkConnected(),
    run: <T>(op: () => Promise<T>) => this.run(op),
    released: (consumer) => {
      const open = this.#c?.open
      if (open?.get(consumer.name) === consumer) open.delete(consumer.name)
    },
  }

  protected override async onConsumerInfo(name: string): Promise<ConsumerInfo | null> {
    const info = await this.#consumerInfo(name)
    return info === null ? null : { name, sourceId: sourceOfFilter(this.#o.subjectPrefix, info), ackSeq: ackSeqOf(info) }
  }

  protected override async onConsumers(): Promise<ConsumerInfo[]> {
    this.#checkConnected()
    try {
      const all = await this.#c!.jsm.consumers.list(this.#o.stream).next()
      // Readers' short-lived consumers have no durable name.
      return all.filter((i) => i.config.durable_name !== undefined && i.config.durable_name !== '')
        .map((i) => ({ name: i.name, sourceId: sourceOfFilter(this.#o.subjectPrefix, i), ackSeq: ackSeqOf(i) }))
    } catch (err) {
      throw natsError('listing consumers', err)
    }
  }

  protected override async onDeleteConsumer(name: string): Promise<boolean> {
    if (this.#c!.open.has(name)) throw new LogError('invalid_argument', `consumer ${name} is open; close it before deleting it`)
    this.#checkConnected()
    try {
      return await this.#deleteOnServer(name)
    } catch (err) {
      throw natsError('deleting a consumer', err)
    }
  }

  protected override async onSync(): Promise<void> {
    await this.#c!.lastAppend.catch(() => undefined)
  }

  protected override onClosing(): void {
    for (const consumer of [...this.#c!.open.values()]) void consumer?.close()
  }

  protected override async onClose(): Promise<void> {
    const c = this.#c!
    // Not awaited: the status iterator settles its return only at the next status.
    void c.status.return?.()
    if (c.owned) await c.nc.close().catch(() => undefined)
  }
}

/**
 * A consumer's acknowledged position: its ack floor, or, with nothing of its own
 * unacknowledged, how far the server has scanned it (a filtered consumer's scan passes
 * other sources' records).
 */
function ackSeqOf(info: NatsConsumerInfo): number {
  // The server reports an ack floor of 0 for a consumer made at a start seq until its first
  // ack: nothing before that seq was ever its to acknowledge.
  const floor = Math.max(info.ack_floor.stream_seq, (info.config.opt_start_seq ?? 1) - 1)
  return info.num_ack_pending > 0 ? floor : Math.max(floor, info.delivered.stream_seq)
}

function sourceOfFilter(prefix: string, info: NatsConsumerInfo): string | null {
  const filter = info.config.filter_subject ?? ''
  return filter === '' ? null : sourceOf(prefix, filter)
}
