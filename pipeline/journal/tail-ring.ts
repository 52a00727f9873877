/**
 * The records the journal published last, kept in memory so that a consumer at the log's
 * end (the delivery tail, the recorder, webhook workers: all of them, most of the time)
 * reads what was just appended without opening a segment. A read from a file costs an
 * open, a read and a close, each a trip through libuv's four-thread pool that queues
 * behind the journal's own fdatasync; a read from here is a copy on the event loop.
 *
 * The ring holds exactly what the writer has published to readers, fed in the same
 * synchronous step that publishes a group to the segments, so it is never ahead of what
 * a file read would return: a record is here only once its append could resolve under
 * the fsync policy, as the consumers' rule wants. Seqs in the ring are contiguous and end
 * at the last record published; a read that starts before the ring's first record goes
 * to the files (which hold the ring's records too, so a reader crosses into the ring
 * with no gap and no duplicate: both are keyed by seq).
 *
 * Bounded twice, by an estimate of the memory its records take and by their count,
 * evicting the oldest first. Records are decoded once, at append (`hold`); each
 * reader is handed copies (`copiesOf`), never the ring's own objects, so one consumer
 * changing its records cannot change what another sees. Freezing alone cannot do that:
 * a typed array with elements cannot be frozen, so the data must be copied either way.
 * Copying the held record is the cheaper copy: per 1 KB record, decoding it again from
 * its encoded bytes (checksum, two strings, the copy) took 1.9 to 2.7 µs, a copy of the
 * held record alone 0.65 to 1.1 µs, and copies batched as `copiesOf` makes them 0.33 µs
 * in batches of 11 and 0.11 µs in batches of 256 (a micro-benchmark on this 2-core VM
 * at a load of about 3).
 */
import type { LogRecord } from '../log.js'

/**
 * Memory a held record costs beyond its data and dedup id, estimated: the record object,
 * the view of its data and the ring's slot. Counted so that many tiny records cannot exceed
 * the byte bound by far.
 */
const ENTRY_OVERHEAD_BYTES = 200
/**
 * Held records' data are copied into chunks of this size, each record a view of its part:
 * an ArrayBuffer per record nearly doubled the CPU of an append (700-byte appends, fsync
 * `never`: 3.1 to 3.6 µs each without the memory tail, 6.4 with a buffer per record, 4.3
 * to 4.5 with chunks; GC included, a micro-benchmark on this 2-core VM). Chunks are
 * filled in seq order and records leave the ring in seq order, so a chunk is freed once
 * its last record leaves: the chunks alive hold at most the ring's bytes plus one chunk.
 */
const CHUNK_BYTES = 256 * 1024
/** A record's data larger than this gets a buffer of its own, so a chunk is not mostly waste. */
const MAX_CHUNKED_BYTES = 16 * 1024

export class TailRing {
  readonly #maxBytes: number
  readonly #maxRecords: number
  /** Circular: `#count` records from `#head`, oldest first. */
  readonly #slots: (LogRecord | undefined)[]
  readonly #sizes: number[]
  #head = 0
  #count = 0
  #bytes = 0
  /** Seq the next published record must have: one past the last published. */
  #next: number
  /** Where `hold` copies data to; see CHUNK_BYTES. */
  #chunk = new Uint8Array(0)
  #chunkUsed = 0

  /** `lastSeq`: the last record already published (on disk) when the ring starts, empty. */
  constructor(lastSeq: number, maxBytes: number, maxRecords: number) {
    this.#next = lastSeq + 1
    this.#maxBytes = maxBytes
    // No bytes holds no record either: off, as with no records.
    this.#maxRecords = maxBytes === 0 ? 0 : maxRecords
    this.#slots = new Array<LogRecord | undefined>(this.#maxRecords).fill(undefined)
    this.#sizes = new Array<number>(this.#maxRecords).fill(0)
  }

  /**
   * The record as the ring will keep it, made at append: its own copy of the data, so the
   * appender's buffer is neither pinned nor shared. The ring's objects are never handed
   * to a reader who could change them (see `copiesOf`).
   */
  hold(seq: number, time: number, dedupId: string, sourceId: string, data: Uint8Array): LogRecord {
    if (this.#maxRecords === 0) return { seq, time, dedupId, sourceId, data }
    const n = data.byteLength
    let own: Uint8Array
    if (n > MAX_CHUNKED_BYTES) {
      own = new Uint8Array(data)
    } else {
      if (this.#chunkUsed + n > this.#chunk.byteLength) {
        this.#chunk = new Uint8Array(CHUNK_BYTES)
        this.#chunkUsed = 0
      }
      own = this.#chunk.subarray(this.#chunkUsed, this.#chunkUsed + n)
      own.set(data)
      this.#chunkUsed += n
    }
    return { seq, time, dedupId, sourceId, data: own }
  }

  /** Seq of the oldest record held; one past the last published when empty. */
  get firstSeq(): number {
    return this.#next - this.#count
  }

  get records(): number {
    return this.#count
  }

  /** Estimated memory the held records take. */
  get bytes(): number {
    return this.#bytes
  }

  /**
   * A record the writer just published; records come in seq order. One that does not
   * follow the last (nothing in the journal does that; a guard all the same) starts the
   * ring over, so what it holds stays one run of seqs.
   */
  push(r: LogRecord): void {
    if (r.seq !== this.#next) this.#clear(r.seq)
    this.#next = r.seq + 1
    if (this.#maxRecords === 0) return
    const size = ENTRY_OVERHEAD_BYTES + r.data.byteLength + 2 * r.dedupId.length + r.sourceId.length
    if (size > this.#maxBytes) {
      // Never held: the ring starts over after it, and readers of it go to the files.
      this.#clear(r.seq + 1)
      return
    }
    while (this.#count === this.#maxRecords || (this.#count > 0 && this.#bytes + size > this.#maxBytes)) this.#evict()
    const slot = (this.#head + this.#count) % this.#maxRecords
    this.#slots[slot] = r
    this.#sizes[slot] = size
    this.#count++
    this.#bytes += size
  }

  /**
   * Up to `max` held records from `fromSeq` on, the ring's own objects (callers hand out
   * `copiesOf` them); [] when `fromSeq` is past the last published. Undefined when
   * `fromSeq` is before the oldest record held: that read is the files'.
   */
  read(fromSeq: number, max: number): readonly LogRecord[] | undefined {
    const first = this.#next - this.#count
    if (fromSeq < first) return undefined
    const n = Math.min(max, this.#next - fromSeq)
    if (n <= 0) return []
    const out = new Array<LogRecord>(n)
    let slot = (this.#head + (fromSeq - first)) % this.#maxRecords
    for (let i = 0; i < n; i++) {
      out[i] = this.#slots[slot]!
      if (++slot === this.#maxRecords) slot = 0
    }
    return out
  }

  #evict(): void {
    this.#bytes -= this.#sizes[this.#head]!
    this.#slots[this.#head] = undefined
    this.#head = (this.#head + 1) % this.#maxRecords
    this.#count--
  }

  #clear(next: number): void {
    while (this.#count > 0) this.#evict()
    this.#head = 0
    this.#next = next
  }
}

/**
 * A reader's own copies of held records, with the same fields as records read from a
 * segment. The data of one call's records are copied into one new buffer, each record a
 * view of its part: a buffer per record costs an allocation each, several times the
 * copy (figures above), so a reader that keeps one record of a batch keeps the batch's
 * bytes. Records of a source other than `only` (when not null) are not copied but
 * returned as they are held, for a filtered consumer that only looks at them.
 */
export function copiesOf(held: readonly LogRecord[], only: string | null): LogRecord[] {
  let total = 0
  for (const r of held) if (only === null || r.sourceId === only) total += r.data.byteLength
  const bytes = new Uint8Array(total)
  const out = new Array<LogRecord>(held.length)
  let offset = 0
  for (let i = 0; i < held.length; i++) {
    const r = held[i]!
    if (only !== null && r.sourceId !== only) {
      out[i] = r
      continue
    }
    const end = offset + r.data.byteLength
    bytes.set(r.data, offset)
    out[i] = { seq: r.seq, time: r.time, dedupId: r.dedupId, sourceId: r.sourceId, data: bytes.subarray(offset, end) }
    offset = end
  }
  return out
}

