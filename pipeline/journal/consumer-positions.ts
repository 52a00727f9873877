/**
 * Durable consumers, kept in `consumers.json` beside the segments: each one's filter
 * (part of its identity) and acknowledged position.
 *
 * The file is replaced atomically (temporary file, fsync, rename, fsync of the folder)
 * so a crash leaves either the old state or the new one. Changes arriving while a
 * write is under way are group-committed into the next write, so a busy consumer costs
 * one file replacement per batch, not per record.
 *
 * Before each write the log is synced (`beforeWrite`): under a relaxed fsync stance a
 * power cut can take back records that consumers already saw, and a stored position
 * must never point past what the log kept, or the records that later take those seqs
 * would be skipped.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { GroupCommit, replaceFileDurably, temporaryPathOf, unlinkIfPresent } from '../../storage/index.js'
import { ioError, LogError, retryableIoError } from '../log-error.js'

const FILE = 'consumers.json'
/** 1: `{ name: ackSeq }`, before consumers had filters (read as unfiltered). 2: `{ name: { ack, source } }`. */
const FORMAT_VERSION = 2

export interface StoredConsumer {
  readonly ack: number
  /** The source filter, null for every record. */
  readonly sourceId: string | null
}

type Change =
  | { readonly kind: 'create'; readonly name: string; readonly entry: StoredConsumer }
  | { readonly kind: 'ack'; readonly name: string; readonly seq: number }
  | { readonly kind: 'delete'; readonly name: string }

export class ConsumerPositions {
  readonly #dir: string
  readonly #path: string
  /** Consumers as last written to disk: what a restart would see. */
  #durable: Map<string, StoredConsumer>
  readonly #writes: GroupCommit<Change>
  readonly #beforeWrite: () => Promise<void>

  private constructor(dir: string, consumers: Map<string, StoredConsumer>, beforeWrite: () => Promise<void>) {
    this.#dir = dir
    this.#path = join(dir, FILE)
    this.#durable = consumers
    this.#beforeWrite = beforeWrite
    this.#writes = new GroupCommit<Change>({ commit: (changes) => this.#commit(changes) })
  }

  static async load(dir: string, beforeWrite: () => Promise<void>): Promise<ConsumerPositions> {
    const path = join(dir, FILE)
    // A leftover temporary file is a replacement that never got renamed: the
    // previous file is still the truth.
    await unlinkIfPresent(temporaryPathOf(path)).catch((err: unknown) => {
      throw ioError('removing a stale consumers.json.tmp', err)
    })
    let text: string
    try {
      text = await readFile(path, 'utf8')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new ConsumerPositions(dir, new Map(), beforeWrite)
      throw ioError('reading consumers.json', err)
    }
    return new ConsumerPositions(dir, parseConsumers(text, path), beforeWrite)
  }

  get(name: string): StoredConsumer | undefined {
    return this.#durable.get(name)
  }

  all(): ReadonlyMap<string, StoredConsumer> {
    return this.#durable
  }

  /** Stores a new consumer; one stored meanwhile under the name is kept (create-if-absent). */
  create(name: string, entry: StoredConsumer): Promise<void> {
    return this.#writes.submit({ kind: 'create', name, entry })
  }

  /** Resolves once a write including this position is durable. */
  set(name: string, seq: number): Promise<void> {
    return this.#writes.submit({ kind: 'ack', name, seq })
  }

  delete(name: string): Promise<void> {
    return this.#writes.submit({ kind: 'delete', name })
  }

  /** Waits for changes already submitted. */
  drain(): Promise<void> {
    return this.#writes.drain()
  }

  async #commit(changes: Change[]): Promise<void> {
    const next = new Map(this.#durable)
    for (const c of changes) {
      const had = next.get(c.name)
      if (c.kind === 'create') {
        if (had === undefined) next.set(c.name, c.entry)
      } else if (c.kind === 'delete') {
        next.delete(c.name)
      } else if (had !== undefined && c.seq > had.ack) {
        // Positions only move forward: acks completed out of order by concurrent
        // workers must not move a consumer back and make it re-deliver. An ack for a
        // consumer deleted meanwhile is dropped.
        next.set(c.name, { ack: c.seq, sourceId: had.sourceId })
      }
    }
    const consumers: Record<string, { ack: number; source: string | null }> = {}
    for (const [name, e] of next) consumers[name] = { ack: e.ack, source: e.sourceId }
    const body = { version: FORMAT_VERSION, consumers }
    await this.#beforeWrite()
    try {
      await replaceFileDurably(this.#path, this.#dir, Buffer.from(`${JSON.stringify(body)}\n`))
    } catch (err) {
      // The old file is intact whatever failed, so a passing cause is only worth a retry.
      throw retryableIoError('writing consumers.json', err)
    }
    this.#durable = next
  }
}

function parseConsumers(text: string, path: string): Map<string, StoredConsumer> {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    throw new LogError('log_corrupt', `${path} is not valid JSON`, { cause: err })
  }
  const file = parsed as { version?: unknown; consumers?: unknown } | null
  if (file === null || typeof file !== 'object' || (file.version !== 1 && file.version !== 2) || typeof file.consumers !== 'object' || file.consumers === null) {
    throw new LogError('log_corrupt', `${path} does not hold version 1 or 2 consumer positions`)
  }
  const consumers = new Map<string, StoredConsumer>()
  for (const [name, value] of Object.entries(file.consumers)) {
    const v = value as { ack?: unknown; source?: unknown } | number
    const ack = file.version === 1 ? v : typeof v === 'object' && v !== null ? v.ack : undefined
    const source = file.version === 1 ? null : typeof v === 'object' && v !== null ? v.source : undefined
    if (typeof ack !== 'number' || !Number.isSafeInteger(ack) || ack < 0 || (source !== null && typeof source !== 'string')) {
      throw new LogError('log_corrupt', `${path}: consumer ${JSON.stringify(name)} is not a position and a filter`)
    }
    consumers.set(name, { ack, sourceId: source })
  }
  return consumers
}
