import { constants as bufferLimits } from 'node:buffer'
import { constants as fsFlags } from 'node:fs'
import { open } from 'node:fs/promises'
import { dirname } from 'node:path'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import Type, { type Static } from 'typebox'
import { Compile } from 'typebox/compile'
import { crc32c } from '../../../storage/index.js'
import { replaceFileDurably } from '../../../storage/index.js'
import type { Column, IndexPart } from './expiring-index.js'
import type { NonceExport, NonceSnapshot } from './nonce-store.js'
import type { DedupExport, DedupSnapshot } from './signal-dedup.js'

/**
 * The ingest state (dedup index and live nonces), saved now and then while the gateway
 * runs and at a clean shutdown, so that the next start takes it over and reads from the
 * log only what came after, instead of rebuilding a full dedup window from the log
 * (about 9 µs a record: some 18 s for a 30-minute window at 1,000 signals/s, during
 * which ingest waits).
 *
 * Layout, little-endian: the magic; each array as (bytes per element, element count, the
 * elements); the header as JSON; and a footer of the header's offset and length, the
 * number of arrays and a CRC-32C of everything before it. Each part is padded to 8
 * bytes so the arrays can be read in place. The arrays are the index parts of each table
 * in the header's `tables` order, each part as its keys, expiries and columns
 * (ExpiringIndex). The header comes last because it names what the arrays refer to
 * (sources, key scopes), which is only complete once the last array is copied out: the
 * file is written as it is exported, a shard at a time, never held whole in memory.
 */
const MAGIC = Buffer.from('SGWSTAT2')
const VERSION = 2
const DESCRIPTOR_BYTES = 8
const FOOTER_BYTES = 16
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

interface StateOf<D, N> {
  readonly writtenAt: number
  readonly dedupWindowMs: number
  readonly nonceWindowMs: number
  /** Null when the log was empty. */
  readonly log: LogMark | null
  readonly dedup: D
  readonly nonces: N
}

/** The state as written: the stores export themselves shard by shard while it is written. */
export type IngestStateToSave = StateOf<DedupExport, NonceExport>
/** The state as read back. */
export type IngestStateSnapshot = StateOf<DedupSnapshot, NonceSnapshot>

const TableLayout = Type.Object({
  name: Type.Union([Type.Literal('dedup.by_signal'), Type.Literal('dedup.by_idempotency_key'), Type.Literal('nonces')]),
  parts: Type.Integer({ minimum: 0, maximum: 1024 }),
  columns: Type.Integer({ minimum: 0, maximum: 64 }),
})
type TableLayout = Static<typeof TableLayout>
type TableName = TableLayout['name']

const Seq = Type.Integer({ minimum: 0 })
const HashKey = Type.String({ maxLength: 64 })
/** Checked before anything is read by it: a file whose checksum holds was still written by somebody. */
const Header = Type.Object({
  v: Type.Literal(VERSION),
  written_at: Type.Number(),
  dedup_window_ms: Type.Number(),
  nonce_window_ms: Type.Number(),
  log: Type.Union([Type.Null(), Type.Object({ seq: Seq, time: Type.Number(), dedup_id: Type.String() })]),
  dedup: Type.Object({ key: HashKey, sources: Type.Array(Type.String()) }),
  nonces: Type.Object({ key: HashKey, scopes: Type.Array(Type.Tuple([Type.String(), Type.String()])) }),
  tables: Type.Array(TableLayout, { minItems: 3, maxItems: 3 }),
})
type Header = Static<typeof Header>
const checkHeader = Compile(Header)

/** The snapshot file is there but cannot be used: damaged, or of another version. */
export class SnapshotError extends Error {
  override readonly name = 'SnapshotError'
}

const pad8 = (n: number) => (8 - (n % 8)) % 8

/**
 * Writes the snapshot whole or not at all (replaceFileDurably): a crash while writing
 * leaves the previous file, or none. `beforeReplace` runs once every byte is written,
 * before the file is synced and put in place. Each shard is copied out and written in its turn,
 * with the event loop let through between, so a running gateway keeps answering and
 * holds at most one shard's copy. Returns the bytes written.
 */
export async function writeStateSnapshot(path: string, state: IngestStateToSave, options: { beforeReplace?: () => Promise<void> } = {}): Promise<number> {
  let size = 0
  let crc = 0
  const counted = (piece: Uint8Array): Uint8Array => {
    size += piece.length
    if (size > MAX_FILE_BYTES - FOOTER_BYTES) throw new SnapshotError(`the state takes more bytes than a start can read back (${MAX_FILE_BYTES})`)
    crc = crc32c(piece, 0, piece.length, crc)
    return piece
  }
  const tables: TableLayout[] = []
  let arrays = 0
  async function* pieces(): AsyncGenerator<Uint8Array> {
    yield counted(MAGIC)
    for (const [name, parts] of [
      ['dedup.by_signal', state.dedup.bySignal],
      ['dedup.by_idempotency_key', state.dedup.byIdempotencyKey],
      ['nonces', state.nonces.index],
    ] as const) {
      let columns = 0
      for (let i = 0; i < parts.length; i++) {
        const part = parts.at(i) as IndexPart
        columns = part.columns.length
        for (const array of [part.keyHi, part.keyLo, part.expiresAt, ...part.columns]) {
          const descriptor = Buffer.alloc(DESCRIPTOR_BYTES)
          descriptor.writeUInt32LE(array.BYTES_PER_ELEMENT, 0)
          descriptor.writeUInt32LE(array.length, 4)
          yield counted(descriptor)
          yield counted(new Uint8Array(array.buffer, array.byteOffset, array.byteLength))
          yield counted(Buffer.alloc(pad8(array.byteLength)))
          arrays++
          // Checksumming and writing a shard's arrays takes milliseconds too: one at a time.
          await yieldToLoop()
        }
      }
      tables.push({ name, parts: parts.length, columns })
    }
    // After the last part: the names cover every entry the parts hold.
    const dedup = state.dedup.names()
    const nonces = state.nonces.names()
    const header: Header = {
      v: VERSION,
      written_at: state.writtenAt,
      dedup_window_ms: state.dedupWindowMs,
      nonce_window_ms: state.nonceWindowMs,
      log: state.log && { seq: state.log.seq, time: state.log.time, dedup_id: state.log.dedupId },
      dedup: { key: Buffer.from(dedup.key).toString('base64'), sources: [...dedup.sources] },
      nonces: { key: Buffer.from(nonces.key).toString('base64'), scopes: nonces.scopes.map(([s, k]) => [s, k]) },
      tables,
    }
    const json = Buffer.from(JSON.stringify(header))
    const headerOffset = size
    yield counted(json)
    yield counted(Buffer.alloc(pad8(json.length)))
    const footer = Buffer.alloc(FOOTER_BYTES)
    footer.writeUInt32LE(headerOffset, 0)
    footer.writeUInt32LE(json.length, 4)
    footer.writeUInt32LE(arrays, 8)
    footer.writeUInt32LE(crc32c(footer, 0, 12, crc), 12)
    size += FOOTER_BYTES
    yield footer
    // Written, not yet synced nor in place: the last moment to make what it covers durable.
    await options.beforeReplace?.()
  }
  await replaceFileDurably(path, dirname(path), pieces(), 0o600)
  return size
}

/** The snapshot at `path`, or undefined if there is none; SnapshotError if it cannot be used. */
export async function readStateSnapshot(path: string): Promise<IngestStateSnapshot | undefined> {
  const file = await readWhole(path)
  if (file === undefined) return undefined
  if (file.length < MAGIC.length + FOOTER_BYTES || !file.subarray(0, MAGIC.length).equals(MAGIC)) throw new SnapshotError('not an ingest state snapshot')
  const footer = file.length - FOOTER_BYTES
  let crc = 0
  for (let off = 0; off < footer + 12; off += STEP_BYTES) {
    crc = crc32c(file, off, Math.min(footer + 12, off + STEP_BYTES), crc)
    await yieldToLoop()
  }
  if (crc !== file.readUInt32LE(footer + 12)) throw new SnapshotError('checksum mismatch')
  const headerOffset = file.readUInt32LE(footer)
  const jsonLength = file.readUInt32LE(footer + 4)
  const count = file.readUInt32LE(footer + 8)
  if (headerOffset < MAGIC.length || headerOffset + jsonLength + pad8(jsonLength) !== footer) throw new SnapshotError('header is not where the footer says')
  let parsed: unknown
  try {
    parsed = JSON.parse(file.toString('utf8', headerOffset, headerOffset + jsonLength))
  } catch {
    throw new SnapshotError('header is not JSON')
  }
  const version = (parsed as { v?: unknown } | null)?.v
  if (version !== VERSION) throw new SnapshotError(`version ${String(version)}, expected ${VERSION}`)
  if (!checkHeader.Check(parsed)) throw new SnapshotError(`header is not as expected: ${[...checkHeader.Errors(parsed)][0]?.instancePath ?? ''}`)
  const header = parsed

  let off = MAGIC.length
  const arrays: Column[] = []
  for (let i = 0; i < count; i++) {
    if (off + DESCRIPTOR_BYTES > headerOffset) throw new SnapshotError('array runs past the header')
    const width = file.readUInt32LE(off)
    const length = file.readUInt32LE(off + 4)
    off += DESCRIPTOR_BYTES
    const bytes = width * length
    if (off + bytes > headerOffset) throw new SnapshotError('array runs past the header')
    arrays.push(arrayAt(file, off, width, length))
    off += bytes + pad8(bytes)
  }
  if (off !== headerOffset) throw new SnapshotError('bytes left after the last array')

  let next = 0
  const parts = (layout: TableLayout | undefined, name: TableName): IndexPart[] => {
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
