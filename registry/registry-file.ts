import { mkdir, open, readFile, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import { replaceFileDurably, syncDir, writeFully } from '../storage/index.js'
import type { RegistrySnapshot } from './records.js'
import { RegistryError } from './registry-error.js'
import { replayChanges, type RegistryChange, type RegistryStore } from './registry-store.js'

/** The change log is folded into the snapshot once it outgrows the snapshot, or this. */
const LOG_MIN_BYTES = 256 * 1024

/**
 * Records serialized between two turns of the event loop when a snapshot is written:
 * about 0.3 MB of JSON and a few milliseconds. Written in one piece, a registry at its
 * bounds (100 MB of JSON) held the loop, and with it every ingest request, for over a second.
 */
const RECORDS_PER_PIECE = 1000

/**
 * The registry as a snapshot (`registry.json`) and a log of the changes since
 * (`registry.log`, one JSON line each). A change costs one appended line and one
 * fdatasync, whatever the registry's size; once the log outgrows the snapshot, the
 * whole state is written as the new snapshot (write a temporary, fsync, rename, fsync
 * the folder) and the log is emptied, so rewriting stays proportional to the changes.
 *
 * A `kill -9` at any point loses no acknowledged change: a torn last line was never
 * acknowledged and is cut off on load. Each snapshot starts a new generation, and each
 * log line carries the generation it was written in, so the lines of a log that a
 * crash (or a failed truncation) left behind a newer snapshot are skipped on load: they
 * are older than the snapshot, and replaying them would put back records it replaced.
 */
export class RegistryFile implements RegistryStore {
  readonly #dir: string
  readonly #path: string
  readonly #logPath: string
  #log: FileHandle | undefined
  #logBytes = 0
  #snapshotBytes = 0
  /** Generation of the snapshot on disk; log lines are written under it. */
  #generation = 0

  constructor(dir: string) {
    this.#dir = dir
    this.#path = join(dir, 'registry.json')
    this.#logPath = join(dir, 'registry.log')
  }

  async load(): Promise<RegistrySnapshot | undefined> {
    const text = await readIfPresent(this.#path)
    let snapshot: RegistrySnapshot | undefined
    if (text !== undefined) {
      snapshot = parseSnapshot(text, this.#path)
      this.#snapshotBytes = text.length
      this.#generation = snapshot.generation ?? 0
    }
    const log = await readIfPresent(this.#logPath)
    if (log === undefined) return snapshot
    const changes: RegistryChange[] = []
    let start = 0
    for (let end = log.indexOf(10, start); end >= 0; end = log.indexOf(10, start)) {
      const line = parseChange(log.subarray(start, end))
      if (line === undefined) {
        // Only the last line can be torn; a bad line with more after it is damage.
        if (log.indexOf(10, end + 1) >= 0) throw new RegistryError(`${this.#logPath}: damaged change at byte ${start}, with changes after it`)
        break
      }
      if ((line.generation ?? 0) >= this.#generation) changes.push(line)
      start = end + 1
    }
    if (start < log.length) {
      // A torn tail: never acknowledged. Cut it, so the next change starts on a clean line.
      const fh = await open(this.#logPath, 'r+')
      try {
        await fh.truncate(start)
        await fh.sync()
      } finally {
        await fh.close()
      }
    }
    this.#logBytes = start
    if (changes.length === 0) return snapshot
    try {
      return replayChanges(snapshot, changes)
    } catch (err) {
      throw new RegistryError(`${this.#path} or ${this.#logPath} holds a record that cannot be loaded (${err instanceof Error ? err.message : String(err)})`, { cause: err })
    }
  }

  async append(change: RegistryChange, current: () => RegistrySnapshot): Promise<void> {
    const line = Buffer.from(`${JSON.stringify({ ...change, generation: this.#generation } satisfies LogLine)}\n`)
    if (this.#logBytes + line.length > Math.max(LOG_MIN_BYTES, this.#snapshotBytes)) return this.#compact(current)
    const log = await this.#openLog()
    try {
      writeFully(log.fd, line, this.#logBytes)
      await log.datasync()
    } catch (err) {
      // The caller rolls the change back, so the line must not survive either (best effort:
      // a disk that failed the write may fail this too, and then a restart may replay it).
      await log.truncate(this.#logBytes).catch(() => undefined)
      throw err
    }
    this.#logBytes += line.length
  }

  /** Writes the whole state (the pending change included) as the snapshot, then empties the log. */
  async #compact(current: () => RegistrySnapshot): Promise<void> {
    // Moved on before the write: if it fails, whether or not the new snapshot landed,
    // lines written from now on are newer than either snapshot and are replayed.
    this.#generation += 1
    // Nothing changes the records while this runs: the registry makes one change at a
    // time and waits for this one to be recorded before the next.
    const pieces = snapshotPieces({ ...current(), generation: this.#generation })
    let bytes = 0
    const counted = async function* () {
      for await (const piece of pieces) {
        bytes += piece.length
        yield piece
      }
    }
    await mkdir(this.#dir, { recursive: true })
    // Mode 600: the files hold token hashes.
    await replaceFileDurably(this.#path, this.#dir, counted(), 0o600)
    this.#snapshotBytes = bytes
    // The change is recorded now. Emptying the log only saves replaying changes the
    // snapshot already holds, so a failure here must not report the change as lost: the
    // log keeps its size and the next change compacts again.
    try {
      const log = await this.#openLog()
      await log.truncate(0)
      await log.sync()
      this.#logBytes = 0
    } catch {
      // Left as it is; see above.
    }
  }

  async #openLog(): Promise<FileHandle> {
    if (this.#log === undefined) {
      await mkdir(this.#dir, { recursive: true })
      this.#log = await open(this.#logPath, 'a', 0o600)
      // A new file's name is durable only once its folder is synced.
      await syncDir(this.#dir)
    }
    return this.#log
  }
}

/**
 * The snapshot as JSON, the same document `JSON.stringify` makes, in pieces of
 * RECORDS_PER_PIECE records with a turn of the event loop after each.
 */
export async function* snapshotPieces(doc: RegistrySnapshot): AsyncGenerator<Buffer> {
  const { tokens, agents, sources, keys, retired_keys, disputes, ...scalars } = doc
  // '{"version":1,"generation":N' with the brace left open for the lists.
  yield Buffer.from(JSON.stringify(scalars).slice(0, -1))
  const lists: Array<[string, readonly unknown[]]> = [
    ['tokens', tokens],
    ['agents', agents],
    ['sources', sources],
    ['keys', keys],
    ['retired_keys', retired_keys ?? []],
    ['disputes', disputes ?? []],
  ]
  for (const [name, records] of lists) {
    yield Buffer.from(`,"${name}":[`)
    for (let i = 0; i < records.length; i += RECORDS_PER_PIECE) {
      const part = JSON.stringify(records.slice(i, i + RECORDS_PER_PIECE))
      yield Buffer.from(`${i === 0 ? '' : ','}${part.slice(1, -1)}`)
      await yieldToLoop()
    }
    yield Buffer.from(']')
  }
  yield Buffer.from('}')
}

/** The snapshot in `text`, read from `path`; RegistryError if a start cannot use it. */
function parseSnapshot(text: Buffer, path: string): RegistrySnapshot {
  let doc: Partial<RegistrySnapshot> | null
  try {
    doc = JSON.parse(text.toString('utf8')) as Partial<RegistrySnapshot> | null
  } catch (err) {
    throw new RegistryError(`${path} is not valid JSON`, { cause: err })
  }
  if (doc === null || typeof doc !== 'object' || doc.version !== 1) {
    throw new RegistryError(`${path}: unknown registry version ${String(doc?.version)}`)
  }
  // Required since the first version; the later lists (retired_keys, disputes) may be absent.
  for (const list of ['tokens', 'agents', 'sources', 'keys'] as const) {
    if (!Array.isArray(doc[list])) throw new RegistryError(`${path} has no ${list} list`)
  }
  return doc as RegistrySnapshot
}

/** The change on one line of the log, or undefined if the line is not one. */
function parseChange(bytes: Buffer): LogLine | undefined {
  let line: Partial<LogLine> | null
  try {
    line = JSON.parse(bytes.toString('utf8')) as Partial<LogLine> | null
  } catch {
    return undefined
  }
  const lists = [line?.tokens, line?.agents, line?.sources, line?.keys, line?.droppedKeys]
  return lists.every((list) => Array.isArray(list)) ? (line as LogLine) : undefined
}

/** A change as the log holds it: with the generation it was written in (absent in older logs: 0). */
type LogLine = RegistryChange & { generation?: number }

async function readIfPresent(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}
