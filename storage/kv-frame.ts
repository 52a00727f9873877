/**
 * On-disk form of the file KV adapter's changes (all integers little-endian). Changes
 * are written in frames, one frame per group commit, so a batch that a crash tore is
 * refused whole by its checksum instead of being half-applied:
 *
 *   frame:  offset size  field
 *                0    4  magic   0x31564b53 ("SKV1" on disk)
 *                4    4  length  bytes after the crc field
 *                8    4  crc     CRC-32C over every byte after this field
 *               12    …  changes, back to back
 *
 *   change: offset size  field
 *                0    1  op        0 mark (the bucket's revision, no key), 1 put, 2 delete
 *                1    8  revision  unsigned, below 2^53
 *                9    8  time      ms since the epoch
 *               17    2  keyBytes
 *               19    4  valueBytes
 *               23    …  key (UTF-8), then the value
 */
import { crc32c } from './crc32c.js'
import { readUint53, writeUint53 } from './uint53.js'

const MAGIC = 0x31564b53
const PREFIX_BYTES = 12
const CHANGE_HEADER_BYTES = 23
/** Bounds what one bad length field can make a load allocate; a frame holds at most one batch. */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024

export const OP_MARK = 0
export const OP_PUT = 1
export const OP_DEL = 2

export interface StoredChange {
  readonly op: typeof OP_MARK | typeof OP_PUT | typeof OP_DEL
  readonly revision: number
  readonly time: number
  readonly key: string
  readonly value: Uint8Array
}

export function changeBytes(keyBytes: number, valueBytes: number): number {
  return CHANGE_HEADER_BYTES + keyBytes + valueBytes
}

/** One frame holding `changes`, in order. */
export function encodeFrame(changes: readonly StoredChange[]): Buffer {
  const keys = changes.map((c) => Buffer.from(c.key, 'utf8'))
  let size = PREFIX_BYTES
  for (let i = 0; i < changes.length; i++) size += changeBytes(keys[i]!.length, changes[i]!.value.length)
  if (size > MAX_FRAME_BYTES) throw new RangeError(`a frame of ${size} bytes exceeds ${MAX_FRAME_BYTES}`)
  const buf = Buffer.allocUnsafe(size)
  buf.writeUInt32LE(MAGIC, 0)
  buf.writeUInt32LE(size - PREFIX_BYTES, 4)
  let at = PREFIX_BYTES
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i]!
    const key = keys[i]!
    buf.writeUInt8(c.op, at)
    writeUint53(buf, at + 1, c.revision)
    writeUint53(buf, at + 9, c.time)
    buf.writeUInt16LE(key.length, at + 17)
    buf.writeUInt32LE(c.value.length, at + 19)
    key.copy(buf, at + CHANGE_HEADER_BYTES)
    buf.set(c.value, at + CHANGE_HEADER_BYTES + key.length)
    at += changeBytes(key.length, c.value.length)
  }
  buf.writeUInt32LE(crc32c(buf, PREFIX_BYTES, size), 8)
  return buf
}

export type FrameResult =
  | { readonly kind: 'frame'; readonly changes: StoredChange[]; readonly size: number }
  /** The bytes end inside the frame. */
  | { readonly kind: 'incomplete' }
  | { readonly kind: 'invalid'; readonly reason: string }

/** Decodes the frame at `offset` of `buf`, copying values out so they do not pin the buffer. */
export function decodeFrame(buf: Buffer, offset: number): FrameResult {
  const avail = buf.length - offset
  if (avail < PREFIX_BYTES) return avail > 0 && !prefixMayBeMagic(buf, offset) ? { kind: 'invalid', reason: 'bad magic' } : { kind: 'incomplete' }
  if (buf.readUInt32LE(offset) !== MAGIC) return { kind: 'invalid', reason: 'bad magic' }
  const size = PREFIX_BYTES + buf.readUInt32LE(offset + 4)
  if (size > MAX_FRAME_BYTES) return { kind: 'invalid', reason: 'bad length' }
  if (avail < size) return { kind: 'incomplete' }
  if (crc32c(buf, offset + PREFIX_BYTES, offset + size) !== buf.readUInt32LE(offset + 8)) return { kind: 'invalid', reason: 'checksum mismatch' }
  const changes: StoredChange[] = []
  const end = offset + size
  for (let at = offset + PREFIX_BYTES; at < end; ) {
    if (end - at < CHANGE_HEADER_BYTES) return { kind: 'invalid', reason: 'truncated change' }
    const op = buf.readUInt8(at)
    const keyBytes = buf.readUInt16LE(at + 17)
    const valueBytes = buf.readUInt32LE(at + 19)
    const next = at + changeBytes(keyBytes, valueBytes)
    if (op > OP_DEL || next > end) return { kind: 'invalid', reason: 'bad change' }
    const keyStart = at + CHANGE_HEADER_BYTES
    changes.push({
      op: op as StoredChange['op'],
      revision: readUint53(buf, at + 1),
      time: readUint53(buf, at + 9),
      key: buf.toString('utf8', keyStart, keyStart + keyBytes),
      value: new Uint8Array(buf.subarray(keyStart + keyBytes, next)),
    })
    at = next
  }
  return { kind: 'frame', changes, size }
}

/** A torn write can leave the first bytes of a frame: whole as far as they go. */
function prefixMayBeMagic(buf: Buffer, offset: number): boolean {
  const magic = Buffer.alloc(4)
  magic.writeUInt32LE(MAGIC, 0)
  const n = Math.min(4, buf.length - offset)
  return buf.subarray(offset, offset + n).equals(magic.subarray(0, n))
}

/**
 * Whether a whole, valid frame starts anywhere after `offset`: a damaged frame with one
 * after it is damage in the middle of what was acknowledged, not a torn tail.
 */
export function validFrameAfter(buf: Buffer, offset: number): boolean {
  const magic = Buffer.alloc(4)
  magic.writeUInt32LE(MAGIC, 0)
  for (let at = buf.indexOf(magic, offset + 1); at >= 0; at = buf.indexOf(magic, at + 1)) {
    if (decodeFrame(buf, at).kind === 'frame') return true
  }
  return false
}
