/**
 * The signal log contract. Shaped by JetStream's semantics, not by the journal's
 * convenience, so that the embedded journal (`log-journal.ts`) and a JetStream
 * stream can stand behind the same interface:
 *
 * - `append` takes a dedup id (JetStream's `Nats-Msg-Id`); a second append with an id
 *   still inside the duplicate window returns the first record's sequence with
 *   `duplicate: true` and writes nothing.
 * - `append` resolves only once the record is durable under the configured fsync
 *   stance; a 202 is answered after that and never before.
 * - `read` reads from a sequence or from a point in time (JetStream's
 *   `opt_start_seq` / `opt_start_time`).
 * - Durable consumers keep an acknowledged position that survives restarts.
 */

/** One record as stored. `seq` starts at 1 and has no gaps. */
export interface LogRecord {
  readonly seq: number
  readonly dedupId: string
  /** Milliseconds since the epoch at which the log stored the record. */
  readonly time: number
  readonly data: Uint8Array
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

export interface SignalLog {
  /** Opens the log, recovering from a torn tail. Idempotent. */
  open(): Promise<void>
  append(dedupId: string, data: Uint8Array): Promise<AppendResult>
  /** Up to `max` records in sequence order, starting at the given point. */
  read(start: ReadStart, max: number): Promise<LogRecord[]>
  info(): LogInfo
  /** The last sequence acknowledged by the durable consumer `name` (0 if none). */
  consumerPosition(name: string): Promise<number>
  /** Durably records that consumer `name` has processed everything up to `seq`. */
  ack(name: string, seq: number): Promise<void>
  /**
   * Resolves once every append acknowledged so far is on disk, whatever the fsync stance
   * (under `always` it already is). For state built on acknowledged appends that must not
   * outlive them in a power cut: the saved ingest state.
   */
  sync(): Promise<void>
  /** Flushes pending appends and closes. Safe to call twice. */
  close(): Promise<void>
}
