/**
 * Durable consumer positions, kept in `consumers.json` beside the segments.
 *
 * The file is replaced atomically (temporary file, fsync, rename, fsync of the folder)
 * so a crash leaves either the old positions or the new ones. Acks arriving while a
 * write is under way are group-committed into the next write, so a busy consumer costs
 * one file replacement per batch, not per record.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { GroupCommit, replaceFileDurably, temporaryPathOf, unlinkIfPresent } from '../../storage/index.js'
import { ioError, LogError } from '../log-error.js'

const FILE = 'consumers.json'
const FORMAT_VERSION = 1

interface PositionsFile {
  readonly version: number
  readonly consumers: Record<string, number>
}

interface Ack {
  readonly name: string
  readonly seq: number
}

export class ConsumerPositions {
  readonly #dir: string
  readonly #path: string
  /** Positions as last written to disk: what a restart would see. */
  #durable: Map<string, number>
  readonly #writes: GroupCommit<Ack>

  private constructor(dir: string, positions: Map<string, number>) {
    this.#dir = dir
    this.#path = join(dir, FILE)
    this.#durable = positions
    this.#writes = new GroupCommit<Ack>({ commit: (acks) => this.#commit(acks) })
  }

  static async load(dir: string): Promise<ConsumerPositions> {
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
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new ConsumerPositions(dir, new Map())
      throw ioError('reading consumers.json', err)
    }
    return new ConsumerPositions(dir, parsePositions(text, path))
  }

  get(name: string): number {
    return this.#durable.get(name) ?? 0
  }

  /** Resolves once a write including this position is durable. */
  set(name: string, seq: number): Promise<void> {
    return this.#writes.submit({ name, seq })
  }

  /** Waits for acks already submitted. */
  drain(): Promise<void> {
    return this.#writes.drain()
  }

  async #commit(acks: Ack[]): Promise<void> {
    const next = new Map(this.#durable)
    for (const { name, seq } of acks) {
      // Positions only move forward: acks completed out of order by concurrent
      // workers must not move a consumer back and make it re-deliver.
      if (seq > (next.get(name) ?? 0)) next.set(name, seq)
    }
    const body: PositionsFile = { version: FORMAT_VERSION, consumers: Object.fromEntries(next) }
    try {
      await replaceFileDurably(this.#path, this.#dir, Buffer.from(`${JSON.stringify(body)}\n`))
    } catch (err) {
      throw ioError('writing consumers.json', err)
    }
    this.#durable = next
  }
}

function parsePositions(text: string, path: string): Map<string, number> {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    throw new LogError('log_corrupt', `${path} is not valid JSON`, { cause: err })
  }
  const file = parsed as Partial<PositionsFile> | null
  if (
    file === null ||
    typeof file !== 'object' ||
    file.version !== FORMAT_VERSION ||
    typeof file.consumers !== 'object' ||
    file.consumers === null
  ) {
    throw new LogError('log_corrupt', `${path} does not hold version ${FORMAT_VERSION} consumer positions`)
  }
  const positions = new Map<string, number>()
  for (const [name, seq] of Object.entries(file.consumers)) {
    if (!Number.isSafeInteger(seq) || seq < 0) {
      throw new LogError('log_corrupt', `${path}: position of ${JSON.stringify(name)} is not a sequence`)
    }
    positions.set(name, seq)
  }
  return positions
}
