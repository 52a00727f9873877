/**
 * The signal-id history's generation under way, appended to `tail.bin` as it grows, so
 * a start reads back from the log only what was added since the last frame (about a
 * second) instead of the whole generation (up to an eighth of SIGNAL_ID_HISTORY_MAX
 * signals, tens of seconds of reading at the defaults).
 *
 * The file is a cache of what the log holds: frames are not synced, and a frame that
 * is torn, garbled or out of order ends the usable prefix. Whatever the frames do not
 * cover is read from the log, as it was before the file existed.
 *
 * Frame: magic u32, count u32, the generation's first seq, the frame's first and last
 * seqs (u64 each), CRC-32C u32 of everything after the magic but itself, then `count`
 * fingerprints as (hi, lo) u32 pairs, one for each seq of the frame in order. Little-
 * endian throughout. Frames chain: each starts right after the one before, the first at
 * the generation's start, so a frame lost to a failed write ends the usable prefix
 * instead of leaving a silent gap. (The history writes no frame once an add skips a seq
 * or comes late, for the same reason.)
 */
import { crc32c, readUint53, writeUint53 } from '../../../storage/index.js'

const MAGIC = 0x31544953 // "SIT1", little-endian
const HEADER_BYTES = 36
const CRC_OFFSET = 32

export const TAIL_FILE = 'tail.bin'

/** Fingerprints added since the last frame, held until the next write. */
export class PendingFrame {
  #pairs = new Uint32Array(2048)
  #count = 0
  #firstSeq = 0
  #lastSeq = 0

  get empty(): boolean {
    return this.#count === 0
  }

  push(hi: number, lo: number, seq: number): void {
    if ((this.#count + 1) * 2 > this.#pairs.length) {
      const grown = new Uint32Array(this.#pairs.length * 2)
      grown.set(this.#pairs)
      this.#pairs = grown
    }
    this.#pairs[this.#count * 2] = hi
    this.#pairs[this.#count * 2 + 1] = lo
    this.#count++
    if (this.#firstSeq === 0) this.#firstSeq = seq
    this.#lastSeq = Math.max(this.#lastSeq, seq)
  }

  clear(): void {
    this.#count = 0
    this.#firstSeq = 0
    this.#lastSeq = 0
  }

  /** The frame of everything pushed since the last take, for a generation starting at `generationFirstSeq`. */
  take(generationFirstSeq: number): Buffer {
    const body = Buffer.from(this.#pairs.buffer, 0, this.#count * 8)
    const frame = Buffer.allocUnsafe(HEADER_BYTES + body.length)
    frame.writeUInt32LE(MAGIC, 0)
    frame.writeUInt32LE(this.#count, 4)
    writeUint53(frame, 8, generationFirstSeq)
    writeUint53(frame, 16, this.#firstSeq)
    writeUint53(frame, 24, this.#lastSeq)
    body.copy(frame, HEADER_BYTES)
    frame.writeUInt32LE(crc32c(frame, 4, CRC_OFFSET, crc32c(frame, HEADER_BYTES)), CRC_OFFSET)
    this.clear()
    return frame
  }
}

export interface TailFrames {
  /** First seq of the generation the frames belong to (0 when there are none). */
  readonly generationFirstSeq: number
  /** Last seq the usable frames cover (0 when there are none). */
  readonly lastSeq: number
  /** Every fingerprint of the usable frames, as (hi, lo) pairs. */
  readonly pairs: Uint32Array
  /** Length of the usable prefix of the file. */
  readonly usableBytes: number
}

/**
 * The usable prefix of a tail file: whole frames with good checksums, of one generation,
 * chained from its first seq, covering nothing past `logLastSeq` (a log cut back after
 * a crash no longer holds what a later frame describes).
 */
export function readTailFrames(file: Buffer, logLastSeq: number): TailFrames {
  const bodies: Uint8Array[] = []
  let generationFirstSeq = 0
  let lastSeq = 0
  let off = 0
  while (off + HEADER_BYTES <= file.length && file.readUInt32LE(off) === MAGIC) {
    const count = file.readUInt32LE(off + 4)
    const end = off + HEADER_BYTES + count * 8
    if (end > file.length) break
    if (crc32c(file, off + 4, off + CRC_OFFSET, crc32c(file, off + HEADER_BYTES, end)) !== file.readUInt32LE(off + CRC_OFFSET)) break
    const generation = readUint53(file, off + 8)
    const frameFirst = readUint53(file, off + 16)
    const frameLast = readUint53(file, off + 24)
    const chained = bodies.length === 0 ? frameFirst === generation : generation === generationFirstSeq && frameFirst === lastSeq + 1
    if (!chained || frameLast - frameFirst + 1 !== count || frameLast > logLastSeq) break
    generationFirstSeq = generation
    lastSeq = frameLast
    bodies.push(file.subarray(off + HEADER_BYTES, end))
    off = end
  }
  // Copied into an aligned buffer: a Uint32Array view needs a 4-byte aligned offset.
  const pairs = new Uint32Array(bodies.reduce((n, b) => n + b.length, 0) / 4)
  const bytes = new Uint8Array(pairs.buffer)
  let at = 0
  for (const body of bodies) {
    bytes.set(body, at)
    at += body.length
  }
  return { generationFirstSeq, lastSeq, pairs, usableBytes: off }
}
