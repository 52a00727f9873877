import { constants as bufferLimits } from 'node:buffer'
import { constants as fsFlags } from 'node:fs'
import { open } from 'node:fs/promises'
import { dirname } from 'node:path'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import { crc32c } from '../journal/crc32c.js'
import { replaceFileDurably } from '../journal/durable-fs.js'
import type { Column, IndexPart } from './expiring-index.js'
import type { NonceSnapshot } from './nonce-store.js'
import type { DedupSnapshot } from './signal-dedup.js'

/**
 * The ingest state (dedup index and live nonces) as written at a clean shutdown, so
 * that the next start takes it over and reads from the log only what came after,
 * instead of rebuilding a full dedup window from the log (about 9 µs a record: some
 * 18 s for a 30-minute window at 1,000 signals/s, during which ingest waits).
 *
 * Layout, little-endian: the magic, the header's length and the number of arrays, the
 * header as JSON, then each array as (bytes per element, element count, the elements),
 * each part padded to 8 bytes so the arrays can be read in place, and last a CRC-32C of
 * everything before it. The arrays are the index parts of each table in the header's
 * `tables` order, each part as its keys, expiries and columns (ExpiringIndex).
 */
const MAGIC = Buffer.from('SGWSTAT1')
const VERSION = 1
const PREFIX_BYTES = MAGIC.length + 8
const DESCRIPTOR_BYTES = 8
/** The largest file read back whole (a Buffer's limit: 4 GiB here, about 75 million signals). */
const MAX_FILE_BYTES = bufferLimits.MAX_LENGTH
/** Reads and checksums run in steps of this much, with the event loop let through between. */
const STEP_BYTES = 64 * 1024 * 1024

/** The log's last record when the state was taken: the state covers it and all before. */
export interface LogMark {
  readonly seq: number
  readonly time: number
  readonly dedupId: string
}

export interface IngestStateSnapshot {
  readonly writtenAt: number
  readonly dedupWindowMs: number
  readonly nonceWindowMs: number
  /** Null when the log was empty. */
  readonly log: LogMark | null
  readonly dedup: DedupSnapshot
  readonly nonces: NonceSnapshot
}

interface TableLayout {
  readonly name: 'dedup.by_signal' | 'dedup.by_idempotency_key' | 'nonces'
  readonly parts: number
  readonly columns: number
}

interface Header {
  readonly v: number
  readonly written_at: number
  readonly dedup_window_ms: number
  readonly nonce_window_ms: number
  readonly log: { seq: number; time: number; dedup_id: string } | null
  readonly dedup: { key: string; sources: string[] }
  readonly nonces: { key: string; scopes: Array<[string, string]> }
  readonly tables: TableLayout[]
}

/** The snapshot file is there but cannot be used: damaged, or of another version. */
export class SnapshotError extends Error {
  override readonly name = 'SnapshotError'
}

const pad8 = (n: number) => (8 - (n % 8)) % 8

function partArrays(part: IndexPart): Column[] {
  return [part.keyHi, part.keyLo, part.expiresAt, ...part.columns]
}

function tablesOf(s: IngestStateSnapshot): Array<{ layout: TableLayout; parts: readonly IndexPart[] }> {
  const columns = (parts: readonly IndexPart[]) => parts[0]?.columns.length ?? 0
  return [
    { layout: { name: 'dedup.by_signal', parts: s.dedup.bySignal.length, columns: columns(s.dedup.bySignal) }, parts: s.dedup.bySignal },
    {
      layout: { name: 'dedup.by_idempotency_key', parts: s.dedup.byIdempotencyKey.length, columns: columns(s.dedup.byIdempotencyKey) },
      parts: s.dedup.byIdempotencyKey,
    },
    { layout: { name: 'nonces', parts: s.nonces.index.length, columns: columns(s.nonces.index) }, parts: s.nonces.index },
  ]
}

/**
 * Writes the snapshot whole or not at all (replaceFileDurably): a crash while writing
 * leaves the previous file, or none. Returns the bytes written.
 */
export async function writeStateSnapshot(path: string, snapshot: IngestStateSnapshot): Promise<number> {
  const tables = tablesOf(snapshot)
  const header: Header = {
    v: VERSION,
    written_at: snapshot.writtenAt,
    dedup_window_ms: snapshot.dedupWindowMs,
    nonce_window_ms: snapshot.nonceWindowMs,
    log: snapshot.log && { seq: snapshot.log.seq, time: snapshot.log.time, dedup_id: snapshot.log.dedupId },
    dedup: { key: Buffer.from(snapshot.dedup.key).toString('base64'), sources: [...snapshot.dedup.sources] },
    nonces: { key: Buffer.from(snapshot.nonces.key).toString('base64'), scopes: snapshot.nonces.scopes.map(([s, k]) => [s, k]) },
    tables: tables.map((t) => t.layout),
  }
  const arrays = tables.flatMap((t) => t.parts.flatMap(partArrays))
  const json = Buffer.from(JSON.stringify(header))
  const prefix = Buffer.alloc(PREFIX_BYTES + json.length + pad8(PREFIX_BYTES + json.length))
  MAGIC.copy(prefix, 0)
  prefix.writeUInt32LE(json.length, MAGIC.length)
  prefix.writeUInt32LE(arrays.length, MAGIC.length + 4)
  json.copy(prefix, PREFIX_BYTES)

  const pieces: Uint8Array[] = [prefix]
  for (const array of arrays) {
    const descriptor = Buffer.alloc(DESCRIPTOR_BYTES)
    descriptor.writeUInt32LE(array.BYTES_PER_ELEMENT, 0)
    descriptor.writeUInt32LE(array.length, 4)
    pieces.push(descriptor, new Uint8Array(array.buffer, array.byteOffset, array.byteLength), Buffer.alloc(pad8(array.byteLength)))
  }
  const trailer = Buffer.alloc(4)
  trailer.writeUInt32LE(
    pieces.reduce((crc, piece) => crc32c(piece, 0, piece.length, crc), 0),
    0,
  )
  pieces.push(trailer)
  const size = pieces.reduce((n, piece) => n + piece.length, 0)
  if (size > MAX_FILE_BYTES) throw new SnapshotError(`the state takes ${size} bytes, more than a start can read back (${MAX_FILE_BYTES})`)
  await replaceFileDurably(path, dirname(path), pieces, 0o600)
  return size
}

/** The snapshot at `path`, or undefined if there is none; SnapshotError if it cannot be used. */
export async function readStateSnapshot(path: string): Promise<IngestStateSnapshot | undefined> {
  const file = await readWhole(path)
  if (file === undefined) return undefined
  if (file.length < PREFIX_BYTES + 4 || !file.subarray(0, MAGIC.length).equals(MAGIC)) throw new SnapshotError('not an ingest state snapshot')
  const end = file.length - 4
  let crc = 0
  for (let off = 0; off < end; off += STEP_BYTES) {
    crc = crc32c(file, off, Math.min(end, off + STEP_BYTES), crc)
    await yieldToLoop()
  }
  if (crc !== file.readUInt32LE(end)) throw new SnapshotError('checksum mismatch')
  const jsonLength = file.readUInt32LE(MAGIC.length)
  const count = file.readUInt32LE(MAGIC.length + 4)
  if (PREFIX_BYTES + jsonLength > end) throw new SnapshotError('header runs past the end')
  let header: Header
  try {
    header = JSON.parse(file.toString('utf8', PREFIX_BYTES, PREFIX_BYTES + jsonLength)) as Header
  } catch {
    throw new SnapshotError('header is not JSON')
  }
  if (header.v !== VERSION) throw new SnapshotError(`version ${String(header.v)}, expected ${VERSION}`)

  let off = PREFIX_BYTES + jsonLength + pad8(PREFIX_BYTES + jsonLength)
  const arrays: Column[] = []
  for (let i = 0; i < count; i++) {
    if (off + DESCRIPTOR_BYTES > end) throw new SnapshotError('array runs past the end')
    const width = file.readUInt32LE(off)
    const length = file.readUInt32LE(off + 4)
    off += DESCRIPTOR_BYTES
    const bytes = width * length
    if (off + bytes > end) throw new SnapshotError('array runs past the end')
    arrays.push(arrayAt(file, off, width, length))
    off += bytes + pad8(bytes)
  }
  if (off !== end) throw new SnapshotError('bytes left after the last array')

  let next = 0
  const parts = (layout: TableLayout | undefined, name: TableLayout['name']): IndexPart[] => {
    if (layout?.name !== name) throw new SnapshotError(`table ${name} missing`)
    return Array.from({ length: layout.parts }, () => {
      const [keyHi, keyLo, expiresAt, ...columns] = arrays.slice(next, (next += 3 + layout.columns))
      if (!(keyHi instanceof Uint32Array && keyLo instanceof Uint32Array && expiresAt instanceof Float64Array) || columns.length !== layout.columns) {
        throw new SnapshotError(`table ${name} is not laid out as expected`)
      }
      return { count: keyHi.length, keyHi, keyLo, expiresAt, columns }
    })
  }
  const [bySignal, byKey, nonces] = header.tables
  const snapshot: IngestStateSnapshot = {
    writtenAt: header.written_at,
    dedupWindowMs: header.dedup_window_ms,
    nonceWindowMs: header.nonce_window_ms,
    log: header.log && { seq: header.log.seq, time: header.log.time, dedupId: header.log.dedup_id },
    dedup: {
      key: Buffer.from(header.dedup.key, 'base64'),
      sources: header.dedup.sources,
      bySignal: parts(bySignal, 'dedup.by_signal'),
      byIdempotencyKey: parts(byKey, 'dedup.by_idempotency_key'),
    },
    nonces: { key: Buffer.from(header.nonces.key, 'base64'), scopes: header.nonces.scopes, index: parts(nonces, 'nonces') },
  }
  if (next !== arrays.length) throw new SnapshotError('arrays left after the last table')
  return snapshot
}

/**
 * The file's bytes, or undefined if there is none. Opened without blocking and refused
 * unless it is a regular file: opening a FIFO put in its place would wait for a writer
 * forever, and the start with it.
 */
async function readWhole(path: string): Promise<Buffer | undefined> {
  let fh
  try {
    fh = await open(path, fsFlags.O_RDONLY | fsFlags.O_NONBLOCK)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
  try {
    const { size } = await fh.stat().then((st) => {
      if (!st.isFile()) throw new SnapshotError('not a regular file')
      return st
    })
    if (size > MAX_FILE_BYTES) throw new SnapshotError(`${size} bytes, more than can be read back`)
    const file = Buffer.allocUnsafe(size)
    for (let off = 0; off < size; ) {
      const { bytesRead } = await fh.read(file, off, Math.min(STEP_BYTES, size - off), off)
      if (bytesRead === 0) throw new SnapshotError('file shorter than its size')
      off += bytesRead
    }
    return file
  } finally {
    await fh.close()
  }
}

/** A typed array over the file's bytes, in place when aligned (a large read is), else copied. */
function arrayAt(file: Buffer, off: number, width: number, length: number): Column {
  const at = file.byteOffset + off
  const bytes = () => file.buffer.slice(at, at + width * length)
  switch (width) {
    case 1:
      return new Uint8Array(file.buffer, at, length)
    case 4:
      return at % 4 === 0 ? new Uint32Array(file.buffer, at, length) : new Uint32Array(bytes())
    case 8:
      return at % 8 === 0 ? new Float64Array(file.buffer, at, length) : new Float64Array(bytes())
    default:
      throw new SnapshotError(`arrays of ${width}-byte elements are not expected`)
  }
}
