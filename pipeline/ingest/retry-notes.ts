import { createReadStream } from 'node:fs'
import { mkdir, open, readdir, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { syncDir, unlinkIfPresent, writeFully } from '../journal/durable-fs.js'

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

/** As the ingest-error file: synced within a second, never per note, off the event loop. */
const SYNC_DELAY_MS = 1000

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
  #handle: FileHandle | undefined
  #period = -1
  #size = 0
  #writing: Promise<void> = Promise.resolve()
  #syncTimer: NodeJS.Timeout | undefined

  private constructor(dir: string, options: RetryNotesOptions) {
    this.#dir = dir
    this.#o = options
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
    this.#then(async () => {
      if (period !== this.#period) await this.#rotate(period)
      writeFully((this.#handle as FileHandle).fd, lines, this.#size)
      this.#size += lines.length
    })
    this.#syncSoon()
  }

  /** Closes the last period's file (synced) and opens this one's; drops the files past keepMs. */
  async #rotate(period: number): Promise<void> {
    const old = this.#handle
    this.#handle = undefined
    if (old !== undefined) {
      await old.datasync()
      await old.close()
    }
    const handle = await open(join(this.#dir, fileName(period)), 'a+', 0o600)
    this.#handle = handle
    this.#period = period
    this.#size = (await handle.stat()).size
    // A crash can leave a torn last line: the next note starts on a line of its own.
    const last = Buffer.alloc(1)
    if (this.#size > 0 && (await handle.read(last, 0, 1, this.#size - 1)).bytesRead === 1 && last[0] !== 10) {
      writeFully(handle.fd, Buffer.from('\n'), this.#size)
      this.#size++
    }
    await syncDir(this.#dir)
    await this.#dropExpired()
  }

  async #dropExpired(): Promise<void> {
    const expired = (await this.#periods()).filter((p) => p + PERIOD_MS + this.#o.keepMs < this.#o.now())
    for (const p of expired) await unlinkIfPresent(join(this.#dir, fileName(p)))
  }

  async #periods(): Promise<number[]> {
    return (await readdir(this.#dir))
      .flatMap((n) => {
        const m = NAME.exec(n)
        return m === null ? [] : [Number(m[1])]
      })
      .sort((a, b) => a - b)
  }

  #then(work: () => Promise<void>): void {
    this.#writing = this.#writing.then(work).catch(this.#o.onWriteError)
  }

  #syncSoon(): void {
    if (this.#syncTimer !== undefined) return
    this.#syncTimer = setTimeout(() => {
      this.#syncTimer = undefined
      this.#then(async () => {
        await this.#handle?.datasync()
      })
    }, SYNC_DELAY_MS)
    this.#syncTimer.unref()
  }

  /**
   * Hands every note of the periods that still matter to `take`, oldest first; a torn or
   * damaged line is skipped. Call once at start, before the first `record`.
   */
  async replay(take: (note: RetryNote) => void): Promise<number> {
    await this.#dropExpired()
    let count = 0
    for (const period of await this.#periods()) {
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
    clearTimeout(this.#syncTimer)
    this.#syncTimer = undefined
    this.#flush()
    await this.#writing
    const handle = this.#handle
    this.#handle = undefined
    if (handle === undefined) return
    try {
      await handle.datasync()
    } finally {
      await handle.close()
    }
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
