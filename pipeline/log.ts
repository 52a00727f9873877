/**
 * The signal log contract. Shaped by JetStream's semantics, not by the journal's
 * convenience, so that the embedded journal (`log-journal.ts`) and a JetStream
 * stream can stand behind the same interface:
 *
 * - `append` takes a dedup id (JetStream's `Nats-Msg-Id`); a second append with an id
 *   still inside the duplicate window returns the first record's sequence with
 *   `duplicate: true` and writes nothing. It may name the record's source, which a
 *   JetStream stream carries as the subject `signals.<sourceId>`.
 * - `append` resolves only once the record is durable under the backend's stance; a
 *   202 is answered after that and never before. A consumer sees a record from the same
 *   moment on, never earlier. The journal's stance is its fsync policy; JetStream's
 *   (nats-server 2.9 has no fsync per ack) is the publish ack: written to the OS by the
 *   stream leader and stored by a majority of its replicas, so durability there is
 *   replication (run R3), not fsync.
 * - An append that rejects `unavailable` may still have been stored (JetStream: the
 *   publish reached the server and the ack timed out). Retrying it with the same dedup
 *   id is safe while the id is inside the window: it then answers `duplicate: true`.
 * - `read` reads from a sequence or from a point in time (JetStream's
 *   `opt_start_seq` / `opt_start_time`).
 * - Durable consumers (JetStream pull consumers with AckPolicy.All) wait for new
 *   records instead of polling, may take one source's records only, acknowledge what
 *   they processed, and resume from their acknowledgement after a restart. One that
 *   falls behind what retention keeps is told exactly which records it lost.
 * - A fetch waits any time from 0 up (JetStream's own client refuses waits under 1 s;
 *   its adapter pulls raw), and a fetch with 0 wait hands out every record appended
 *   before it began.
 * - A filtered consumer's position passes the other sources' records it skipped only
 *   while nothing of its own is unacknowledged (an ack of its last record, an empty
 *   fetch): until then its lag counts them. JetStream learns that point from the
 *   server's scan, one consumer info request per such ack or empty fetch.
 */

/** One record as stored. `seq` starts at 1 and has no gaps. */
export interface LogRecord {
  readonly seq: number
  readonly dedupId: string
  /** The source the record was appended for; '' when none was named (and in journals written before sources were stored). */
  readonly sourceId: string
  /** Milliseconds since the epoch at which the log stored the record. */
  readonly time: number
  readonly data: Uint8Array
}

export interface AppendOptions {
  /**
   * The record's source: what a consumer's `sourceId` filter matches (JetStream: the
   * subject `signals.<sourceId>`). 1 to 128 of `[A-Za-z0-9_-]`, so it is one subject token.
   */
  readonly sourceId?: string
}

export interface AppendResult {
  readonly seq: number
  /** True when the dedup id was already in the window: nothing new was written. */
  readonly duplicate: boolean
}

export type ReadStart = { readonly fromSeq: number } | { readonly fromTime: number }

export interface LogInfo {
  /** Sequence of the first record still held (0 when empty). */
  readonly firstSeq: number
  /** Sequence of the last record written (0 when empty). */
  readonly lastSeq: number
  readonly records: number
  readonly bytes: number
}

/**
 * When the log considers an append durable.
 * - `always`: fdatasync before the append resolves (group-committed: one sync serves
 *   every append that arrived while the previous sync ran).
 * - `interval`: the append resolves after write(2); a timer syncs every
 *   `fsyncIntervalMs`. Survives a killed process, not a power cut inside the interval.
 * - `never`: leave it to the OS. Survives a killed process only.
 */
export type FsyncPolicy = 'always' | 'interval' | 'never'

/** The most records one `fetch` may ask for: a batch is held in memory whole. */
export const MAX_FETCH_RECORDS = 4096
/** The longest one `fetch` may wait (JetStream: a pull request's `expires`). */
export const MAX_FETCH_WAIT_MS = 3_600_000

export interface ConsumerOptions {
  /** Only records of this source (JetStream: filter_subject `signals.<sourceId>`). Part of the consumer's identity. */
  readonly sourceId?: string
  /**
   * Where a consumer created by this call starts: the first record it is handed is the
   * first held at or after this seq (JetStream: DeliverByStartSequence; default 1, that is
   * every record held, DeliverAll); a start past the log's end starts at the next record
   * appended. Ignored when the durable consumer exists already.
   */
  readonly startSeq?: number
}

/** Records retention removed after a consumer's position before the consumer read them. */
export interface LostRange {
  readonly fromSeq: number
  readonly toSeq: number
  /**
   * Records removed in the range: `toSeq - fromSeq + 1`, since seqs have no gaps. For a
   * consumer with a `sourceId` filter these are records of every source; which of them were
   * its own cannot be known once they are gone.
   */
  readonly count: number
}

export interface FetchResult {
  /** In sequence order, each after the last record handed out by this consumer. */
  readonly records: readonly LogRecord[]
  /** Set when retention removed records after this consumer's position before it read them. */
  readonly lost: LostRange | null
}

export interface ConsumeOptions {
  /** Records per batch (default 256, at most MAX_FETCH_RECORDS). */
  readonly max?: number
  /** How long each underlying fetch waits (default 30 s); an empty wait yields nothing. */
  readonly expiresMs?: number
  /** Ends the iteration. */
  readonly signal?: AbortSignal
}

export interface LogConsumer {
  readonly name: string
  /** The source filter the consumer was created with, null for every record. */
  readonly sourceId: string | null
  /**
   * Up to `max` records (1 to MAX_FETCH_RECORDS), resolving as soon as at least one is
   * there or `lost` is to be told, else waiting up to `expiresMs` (0 to MAX_FETCH_WAIT_MS)
   * for an append: appends wake waiting fetches, nothing polls on a timer. Resolves
   * `{ records: [], lost: null }` on expiry, on abort, and when the consumer or the log
   * closes while it waits. Fetches of one consumer run one after another.
   */
  fetch(max: number, expiresMs: number, signal?: AbortSignal): Promise<FetchResult>
  /**
   * Acknowledges every record up to `seq` (AckAll): at most the last seq handed out by
   * this consumer; an ack at or below `position()` changes nothing. Durable when it
   * resolves, and the resume point after a restart.
   */
  ack(seq: number): Promise<void>
  /** Hands records out again from the last acknowledged position (a failed batch: JetStream nak). */
  nak(): void
  /** Last acknowledged seq (0 if none). */
  position(): number
  /** Batches as they come (a fetch loop that skips empty waits), until `signal` aborts or the consumer closes. */
  consume(options?: ConsumeOptions): AsyncIterable<FetchResult>
  /** Ends waiting fetches and waits for acks under way; the durable consumer stays. Safe to call twice. */
  close(): Promise<void>
}

/** A durable consumer's state, for lag metrics: `lastSeq - ackSeq` records wait for it (of every source). */
export interface ConsumerInfo {
  readonly name: string
  readonly sourceId: string | null
  /** Last acknowledged seq (0 if none). */
  readonly ackSeq: number
}

export interface SignalLog {
  /** Opens the log, recovering from a torn tail. Idempotent. */
  open(): Promise<void>
  append(dedupId: string, data: Uint8Array, options?: AppendOptions): Promise<AppendResult>
  /** Up to `max` records in sequence order, starting at the given point. */
  read(start: ReadStart, max: number): Promise<LogRecord[]>
  /** Asynchronous, as JetStream's stream info is a request to the server. */
  info(): Promise<LogInfo>
  /**
   * Opens the durable consumer `name` (`[A-Za-z0-9_-]{1,64}`), creating it if absent.
   * Its filter is part of its identity: opening an existing name with another `sourceId`
   * is refused with `invalid_argument`, as is opening a name already open in this process.
   */
  consumer(name: string, options?: ConsumerOptions): Promise<LogConsumer>
  /** The durable consumer `name`, or null if there is none. */
  consumerInfo(name: string): Promise<ConsumerInfo | null>
  /** Every durable consumer, by name. */
  consumers(): Promise<ConsumerInfo[]>
  /** Removes the durable consumer `name` (it must not be open); false if there was none. */
  deleteConsumer(name: string): Promise<boolean>
  /**
   * Resolves once every append acknowledged so far is as durable as the backend makes
   * anything: on disk for the journal, whatever its fsync stance (under `always` it already
   * is); on JetStream, where 2.9 has no fsync to ask for, once the last append made has its
   * ack (replicated). For state built on acknowledged appends that must not outlive them in
   * a power cut: the saved ingest state.
   */
  sync(): Promise<void>
  /** Flushes pending appends and closes; waiting fetches resolve empty. Safe to call twice. */
  close(): Promise<void>
}
