import { createReadStream } from 'node:fs'
import { mkdir, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { unlinkIfPresent } from '../../../storage/index.js'
import { AppendedLines } from './appended-lines.js'

/**
 * What a deduplicated retry changed, which the signal log does not hold (it holds the
 * original signal only): the nonce the retry claimed, and an Idempotency-Key it bound to
 * the signal it replayed. Read back after a restart, so that the retry itself cannot be
 * replayed (`401 replayed_nonce`) and its key still conflicts with another body.
 */
export interface RetryNote {
  readonly source_id: string
  readonly key_id: string
  /** When the nonce was claimed (ms). */
  readonly time: number
  readonly nonce?: string
  readonly bound?: {
    readonly key: string
    readonly signal_id: string
    readonly body_sha256: string
    readonly received_at_ms: number
    readonly test: boolean
  }
}

export interface RetryNotesOptions {
  /** How long a note matters: the longer of the nonce and dedup windows. */
  readonly keepMs: number
  readonly now: () => number
  readonly onWriteError: (err: unknown) => void
}

/** Notes of one period go to one file; whole files are dropped once their period has passed keepMs. */
const PERIOD_MS = 5 * 60 * 1000

const NAME = /^retries\.([0-9]{1,16})\.jsonl$/

/**
 * The retry notes on disk: JSON lines in one file per five-minute period, appended
 * behind the answer (like the ingest-error history) and synced within a second, so a
 * `kill -9` loses none that were appended and a crash of the machine at most that second.
 * A note is written only when a retry claimed a nonce or bound a key, both of which
 * take room in bounded stores, so the files are bounded by the same.
 */
export class RetryNotes {
  readonly #dir: string
  readonly #o: RetryNotesOptions
  #queue: string[] = []
  /** The current period's file, synced within a second as the ingest-error file is. */
  readonly #file: AppendedLines
  #period = -1

  private constructor(dir: string, options: RetryNotesOptions) {
    this.#dir = dir
    this.#o = options
    this.#file = new AppendedLines(options.onWriteError)
  }

  static async open(dir: string, options: RetryNotesOptions): Promise<RetryNotes> {
    await mkdir(dir, { recursive: true })
    return new RetryNotes(dir, options)
  }

  /** Keeps a note after the current turn of the event loop: the answer goes out first. */
  record(note: RetryNote): void {
    this.#queue.push(`${JSON.stringify(note)}\n`)
    if (this.#queue.length === 1) setImmediate(this.#flush)
  }

  readonly #flush = (): void => {
    if (this.#queue.length === 0) return
    const lines = Buffer.from(this.#queue.join(''))
    this.#queue = []
    const period = Math.floor(this.#o.now() / PERIOD_MS) * PERIOD_MS
    this.#file.queue(async () => {
      if (period !== this.#period) {
        // The last period's file is synced as it is closed; the ones past keepMs go.
        await this.#file.open(join(this.#dir, fileName(period)), { syncPrevious: true })
        this.#period = period
        await this.#dropExpired()
      }
      this.#file.put(lines)
    })
    this.#file.syncSoon()
  }

  /** Removes the files past keepMs; the periods left, oldest first. */
  async #dropExpired(): Promise<number[]> {
    const kept: number[] = []
    for (const p of await this.#periods()) {
      if (p + PERIOD_MS + this.#o.keepMs < this.#o.now()) await unlinkIfPresent(join(this.#dir, fileName(p)))
      else kept.push(p)
    }
    return kept
  }

  async #periods(): Promise<number[]> {
    return (await readdir(this.#dir))
      .flatMap((n) => {
        const m = NAME.exec(n)
        return m === null ? [] : [Number(m[1])]
      })
      .sort((a, b) => a - b)
  }

  /**
   * Hands every note of the periods that still matter to `take`, oldest first; a torn or
   * damaged line is skipped. Call once at start, before the first `record`.
   */
  async replay(take: (note: RetryNote) => void): Promise<number> {
    let count = 0
    for (const period of await this.#dropExpired()) {
      let rest = ''
      for await (const chunk of createReadStream(join(this.#dir, fileName(period)), { encoding: 'utf8', highWaterMark: 256 * 1024 })) {
        const parts = (rest + (chunk as string)).split('\n')
        rest = parts.pop() as string
        for (const line of parts) {
          const note = parseNote(line)
          if (note === undefined) continue
          take(note)
          count++
        }
      }
    }
    return count
  }

  /** Writes and syncs what was recorded, and closes. */
  async close(): Promise<void> {
    this.#flush()
    await this.#file.close()
  }
}

function fileName(period: number): string {
  return `retries.${period}.jsonl`
}

function parseNote(line: string): RetryNote | undefined {
  let v: Partial<RetryNote>
  try {
    v = JSON.parse(line) as Partial<RetryNote>
  } catch {
    return undefined
  }
  if (typeof v !== 'object' || v === null || typeof v.source_id !== 'string' || typeof v.key_id !== 'string' || !Number.isFinite(v.time)) return undefined
  if (v.nonce !== undefined && typeof v.nonce !== 'string') return undefined
  const b = v.bound
  if (b !== undefined && !(typeof b === 'object' && b !== null && typeof b.key === 'string' && typeof b.signal_id === 'string' && typeof b.body_sha256 === 'string' && Number.isFinite(b.received_at_ms) && typeof b.test === 'boolean')) return undefined
  return v as RetryNote
}
