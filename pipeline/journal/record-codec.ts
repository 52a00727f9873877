/**
 * On-disk framing of one journal record (all integers little-endian):
 *
 *   offset size  field
 *        0    4  magic     0x324a4c53 ("SLJ2" on disk), so a scan can tell a record
 *                          start from zeroes the file system left behind a crash
 *        4    4  length    bytes after the crc field
 *        8    4  crc       CRC-32C over every byte after this field
 *       12    8  seq       unsigned, below 2^53
 *       20    8  time      ms since the epoch, unsigned, below 2^53
 *       28    2  idLength  UTF-8 bytes of the dedup id
 *       30    1  srcLength bytes of the source id (ASCII; 0 when none)
 *       31    …  dedup id, source id, then the data up to `length`
 *
 * Records written before sources were stored carry magic 0x314a4c53 ("SLJ1") and no
 * srcLength byte (the dedup id starts at 30); they still read, with source ''. One
 * segment may hold both kinds: the magic tells each record's layout.
 *
 * The checksum covers seq and time as well as the payload, so a record whose header
 * was torn but whose payload survived still fails validation.
 */
import { crc32c, readUint53, writeUint53 } from '../../storage/index.js'
import { LogError } from '../log-error.js'

export const RECORD_MAGIC = 0x324a4c53
/** The framing before sources were stored; read, never written. */
export const RECORD_MAGIC_V1 = 0x314a4c53
export const HEADER_BYTES = 31
const HEADER_BYTES_V1 = 30
/** A source id is one subject token: it fits the one-byte length and needs no escaping. */
export const SOURCE_ID = /^[A-Za-z0-9_-]{1,128}$/
/** Bytes before the checksummed region. */
const PREFIX_BYTES = 12
/**
 * Upper bound for a whole framed record. Ingest bodies are at most 16 KB;
 * the bound keeps one bad length field from making recovery allocate gigabytes.
 */
export const MAX_RECORD_BYTES = 1024 * 1024
/** Dedup ids are remembered in memory for the whole window; the cap bounds that cost. */
export const MAX_DEDUP_ID_BYTES = 1024

const LONE_SURROGATE = /\p{Cs}/u
const EMPTY = Buffer.alloc(0)

export interface DecodedRecord {
  readonly seq: number
  readonly time: number
  readonly dedupId: string
  readonly sourceId: string
  readonly data: Uint8Array
}

export type DecodeResult =
  | { readonly kind: 'record'; readonly record: DecodedRecord; readonly size: number }
  /** The bytes end inside the record; `size` is the full framed size when known. */
  | { readonly kind: 'incomplete'; readonly size: number }
  | { readonly kind: 'invalid'; readonly reason: string }

/** Validates a dedup id and returns its UTF-8 bytes. */
export function encodeDedupId(dedupId: string): Buffer {
  if (typeof dedupId !== 'string') {
    throw new LogError('invalid_argument', 'dedup id must be a string')
  }
  // A lone surrogate would be stored as U+FFFD, so the id rebuilt after a restart
  // would no longer equal the one the caller retries with.
  if (LONE_SURROGATE.test(dedupId)) {
    throw new LogError('invalid_argument', 'dedup id must be well-formed Unicode')
  }
  const bytes = Buffer.from(dedupId, 'utf8')
  if (bytes.length > MAX_DEDUP_ID_BYTES) {
    throw new LogError('invalid_argument', `dedup id is longer than ${MAX_DEDUP_ID_BYTES} bytes`)
  }
  return bytes
}

/** Validates a source id ('' for none) and returns its bytes. */
export function encodeSourceId(sourceId: string): Buffer {
  if (sourceId === '') return EMPTY
  if (typeof sourceId !== 'string' || !SOURCE_ID.test(sourceId)) {
    throw new LogError('invalid_argument', 'source id must be 1 to 128 of [A-Za-z0-9_-]')
  }
  return Buffer.from(sourceId, 'latin1')
}


export function framedSize(idBytes: number, dataBytes: number, sourceBytes = 0): number {
  return HEADER_BYTES + idBytes + sourceBytes + dataBytes
}

/** True if the 4 bytes at `offset` start a record of either framing. */
export function isRecordMagic(buf: Buffer, offset: number): boolean {
  const magic = buf.readUInt32LE(offset)
  return magic === RECORD_MAGIC || magic === RECORD_MAGIC_V1
}

export function encodeRecord(seq: number, time: number, id: Buffer, data: Uint8Array, source: Buffer = EMPTY): Buffer {
  const size = framedSize(id.length, data.length, source.length)
  if (size > MAX_RECORD_BYTES) {
    throw new LogError(
      'record_too_large',
      `record of ${size} bytes exceeds the ${MAX_RECORD_BYTES}-byte limit`,
    )
  }
  const buf = Buffer.allocUnsafe(size)
  buf.writeUInt32LE(RECORD_MAGIC, 0)
  buf.writeUInt32LE(size - PREFIX_BYTES, 4)
  writeUint53(buf, 12, seq)
  writeUint53(buf, 20, time)
  buf.writeUInt16LE(id.length, 28)
  buf.writeUInt8(source.length, 30)
  id.copy(buf, HEADER_BYTES)
  source.copy(buf, HEADER_BYTES + id.length)
  buf.set(data, HEADER_BYTES + id.length + source.length)
  buf.writeUInt32LE(crc32c(buf, PREFIX_BYTES, size), 8)
  return buf
}

/**
 * Decodes the record starting at `offset`, looking no further than `end`.
 * `copyData` copies the payload out so a caller keeping the record does not pin the
 * whole read buffer.
 */
export function decodeRecord(buf: Buffer, offset: number, end: number, copyData = true): DecodeResult {
  const avail = end - offset
  if (avail < PREFIX_BYTES) return { kind: 'incomplete', size: HEADER_BYTES }
  const magic = buf.readUInt32LE(offset)
  if (magic !== RECORD_MAGIC && magic !== RECORD_MAGIC_V1) return { kind: 'invalid', reason: 'bad magic' }
  const header = magic === RECORD_MAGIC ? HEADER_BYTES : HEADER_BYTES_V1
  const length = buf.readUInt32LE(offset + 4)
  const size = PREFIX_BYTES + length
  if (size < header || size > MAX_RECORD_BYTES) {
    return { kind: 'invalid', reason: `bad length ${length}` }
  }
  if (avail < size) return { kind: 'incomplete', size }
  const crc = buf.readUInt32LE(offset + 8)
  if (crc32c(buf, offset + PREFIX_BYTES, offset + size) !== crc) {
    return { kind: 'invalid', reason: 'checksum mismatch' }
  }
  const idLength = buf.readUInt16LE(offset + 28)
  const sourceLength = header === HEADER_BYTES ? buf.readUInt8(offset + 30) : 0
  if (header + idLength + sourceLength > size) return { kind: 'invalid', reason: 'bad dedup id length' }
  const idStart = offset + header
  const sourceStart = idStart + idLength
  const dataStart = sourceStart + sourceLength
  const data = copyData
    ? new Uint8Array(buf.subarray(dataStart, offset + size))
    : buf.subarray(dataStart, offset + size)
  return {
    kind: 'record',
    size,
    record: {
      seq: readUint53(buf, offset + 12),
      time: readUint53(buf, offset + 20),
      dedupId: buf.toString('utf8', idStart, sourceStart),
      sourceId: sourceLength === 0 ? '' : buf.toString('latin1', sourceStart, dataStart),
      data,
    },
  }
}
