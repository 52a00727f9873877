import type { LogRecord, SignalLog } from '../../pipeline/index.js'

/** Records of one catch-up read: the log is read in chunks aligned on this many seqs. */
export const CHUNK_RECORDS = 1024
/** Chunks kept for the loops that read them next (about 0.6 MB each at ~600 bytes a record). */
const CACHED_CHUNKS = 16
/** Reads of the log under way at once, all loops together. */
const MAX_READS = 4

interface Chunk {
  records: Promise<readonly LogRecord[]>
  /** The read's number, given when it starts reading (after waiting for a slot); undefined while it waits. */
  started: number | undefined
  /** The records, once read. */
  result: readonly LogRecord[] | undefined
}

/**
 * The reads of loops catching up (after a start, or after their queue was dropped),
 * shared: the log is read in chunks aligned on CHUNK_RECORDS, a chunk being read is
 * awaited by every loop that wants it, and the last CACHED_CHUNKS chunks are kept. So
 * 10,000 loops resuming from nearby positions read and check each record about once, not
 * once per loop, and at most MAX_READS reads run at once.
 *
 * A whole chunk never changes. One cut short by the log's end does, as records are
 * appended: a loop may use it only if it was read after the loop began listening to the
 * tail (`mark()` then `chunk(seq, mark)`), since the tail hands the loop only what comes
 * after that moment.
 */
export class CatchUpReads {
  readonly #log: SignalLog
  readonly #chunks = new Map<number, Chunk>()
  #counter = 0
  #running = 0
  readonly #waiting: (() => void)[] = []
  /** Log reads made (for tests and metrics). */
  reads = 0

  constructor(log: SignalLog) {
    this.#log = log
  }

  /** Reads started from now on are numbered above this. */
  mark(): number {
    return this.#counter
  }

  /**
   * The chunk holding `fromSeq`: records in seq order from the chunk's first seq (or the
   * first held after it), CHUNK_RECORDS of them unless the log ends sooner. The caller
   * skips those below `fromSeq`; a chunk of CHUNK_RECORDS means more may follow it.
   */
  async chunk(fromSeq: number, since: number): Promise<readonly LogRecord[]> {
    const start = Math.floor((fromSeq - 1) / CHUNK_RECORDS) * CHUNK_RECORDS + 1
    for (;;) {
      let chunk = this.#chunks.get(start)
      // A finished read cut short by the log's end and begun before this loop listened is stale for it: the first to see that reads again.
      if (chunk === undefined || (chunk.result !== undefined && !whole(chunk.result, start) && chunk.started! <= since)) chunk = this.#begin(start)
      const records = await chunk.records
      if (whole(records, start) || (chunk.started ?? Infinity) > since) {
        // Most recently used last.
        if (this.#chunks.get(start) === chunk) {
          this.#chunks.delete(start)
          this.#chunks.set(start, chunk)
        }
        return records
      }
      // It was under way before this loop listened and ended short: look again (another loop may have begun a newer read).
    }
  }

  #begin(start: number): Chunk {
    const chunk: Chunk = { records: Promise.resolve([]), started: undefined, result: undefined }
    chunk.records = this.#read(start, chunk)
    this.#chunks.set(start, chunk)
    if (this.#chunks.size > CACHED_CHUNKS) this.#chunks.delete(this.#chunks.keys().next().value as number)
    chunk.records.then(
      (records) => void (chunk.result = records),
      () => {
        if (this.#chunks.get(start) === chunk) this.#chunks.delete(start)
      },
    )
    return chunk
  }

  async #read(start: number, chunk: Chunk): Promise<readonly LogRecord[]> {
    if (this.#running >= MAX_READS) await new Promise<void>((resolve) => this.#waiting.push(resolve))
    else this.#running++
    try {
      chunk.started = ++this.#counter
      this.reads++
      return await this.#log.read({ fromSeq: start }, CHUNK_RECORDS)
    } finally {
      const next = this.#waiting.shift()
      if (next !== undefined) next()
      else this.#running--
    }
  }
}

/** CHUNK_RECORDS records from `start` with no gap: what the log holds there for good. */
function whole(records: readonly LogRecord[], start: number): boolean {
  return records.length === CHUNK_RECORDS && records[0]!.seq === start && records[CHUNK_RECORDS - 1]!.seq === start + CHUNK_RECORDS - 1
}
