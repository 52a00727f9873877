import { createReadStream } from 'node:fs'
import { mkdir, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import { replaceFileDurably, unlinkIfPresent } from '../../../storage/index.js'
import { AppendedLines } from './appended-lines.js'

/** Appended bytes that start a rewrite at the least, however small the history held. */
const MIN_COMPACT_BYTES = 8 * 1024 * 1024

/** Lines written between two turns of the event loop when the history is rewritten. */
const LINES_PER_PIECE = 2000

const NAME = /^refusals\.([1-9][0-9]{0,15})\.jsonl$/

/** First line of a rewritten file: the lines of `generation` from byte `offset` on came after it. */
interface SnapshotMark {
  readonly after: { readonly generation: number; readonly offset: number }
}

/**
 * The ingest-error history on disk: one file of JSON lines, appended after each answer
 * and synced within a second, never line by line (diagnostics must not slow ingest down). What the file
 * keeps is decided in memory, where each source has its own bounds (IngestErrorLog): once
 * the lines appended since the last rewrite outweigh what memory holds (or 8 MB), the
 * file is rewritten as exactly what memory holds, under the next generation number
 * (write a temporary, fsync, rename, fsync the folder), and the old one is removed. So
 * the file stays within about twice the history plus 8 MB, and a flood of refusals for
 * one source, which memory cuts to that source's bound, cannot push another source's
 * history off the disk the way a shared ring of segments did.
 *
 * A crash loses at most the lines the kernel had not written back: a torn or damaged
 * line is skipped at load. Lines appended while a rewrite runs go to the old file and
 * are written again after the new one's, so the rewrite loses none. A rewritten file
 * opens with a line naming where in the old file those lines begin (`SnapshotMark`):
 * a crash before appends move to the new file leaves them only in the old one, and the
 * next start reads the old file from there and nothing before, which the new file
 * holds already, or dropped on purpose.
 */
export class RefusalFile {
  readonly #dir: string
  #generation: number
  readonly #file: AppendedLines
  /** Bytes appended since the last rewrite. */
  #appendedBytes = 0
  /** Appended bytes at which the next rewrite is due: what the last one wrote (memory's share), at least 8 MB. */
  #dueAt = MIN_COMPACT_BYTES
  /** Generations older than the newest found at open, newest first. */
  #older: number[] = []
  /** From the start of a rewrite until appends go to its file. */
  #rewriting = false
  /** Set while a rewrite writes its file: the lines appended meanwhile, for the new file. */
  #during: Buffer[] | undefined

  private constructor(dir: string, generation: number, onWriteError: (err: unknown) => void) {
    this.#dir = dir
    this.#generation = generation
    this.#file = new AppendedLines(onWriteError)
  }

  /**
   * Opens the newest generation in `dir` for appending. Older generations are left for
   * `lines` and `dropOlder`: a crash (or a failed switch) during a rewrite leaves the new
   * file in place while the lines appended meanwhile are only in the old one.
   */
  static async open(dir: string, onWriteError: (err: unknown) => void): Promise<RefusalFile> {
    await mkdir(dir, { recursive: true })
    const names = await readdir(dir)
    const generations = names
      .flatMap((n) => {
        const m = NAME.exec(n)
        return m === null ? [] : [Number(m[1])]
      })
      .sort((a, b) => b - a)
    // Diagnostics: a leftover that cannot be removed must not keep the gateway from starting.
    for (const n of names) if (n.endsWith('.tmp')) await unlinkIfPresent(join(dir, n)).catch(onWriteError)
    const file = new RefusalFile(dir, generations[0] ?? 0, onWriteError)
    file.#older = generations.slice(1)
    if (file.#generation > 0) {
      await file.#file.open(file.#path(), { syncPrevious: false })
      // Unknown how much of it memory will keep: the first rewrite comes after as much again.
      file.#dueAt = Math.max(MIN_COMPACT_BYTES, file.#file.size)
    }
    return file
  }

  /**
   * The lines of the newest generation in file order, then those of any older one, newest
   * first; a torn line is left out. The reader keeps a line of an older generation only if
   * it is newer than what it already holds: the lines appended while a rewrite ran.
   */
  async *lines(): AsyncGenerator<string> {
    let mark: SnapshotMark['after'] | undefined
    for (const generation of [this.#generation, ...this.#older]) {
      if (generation === 0) continue
      let start = 0
      if (mark !== undefined) {
        // Older than the marked one: read before the snapshot was taken, so in it already.
        if (generation !== mark.generation) continue
        start = mark.offset
      }
      let first = generation === this.#generation
      let rest = ''
      for await (const chunk of createReadStream(join(this.#dir, fileName(generation)), { encoding: 'utf8', highWaterMark: 256 * 1024, start })) {
        const text = rest + (chunk as string)
        const parts = text.split('\n')
        rest = parts.pop() as string
        for (const line of parts) {
          if (first) {
            first = false
            mark = snapshotMarkOf(line)
            if (mark !== undefined) continue
          }
          if (line.length > 0) yield line
        }
      }
    }
  }

  /** Whether older generations were found at open: once what was read is rewritten, `dropOlder` removes them. */
  get hasOlder(): boolean {
    return this.#older.length > 0
  }

  async dropOlder(): Promise<void> {
    for (const generation of this.#older) await unlinkIfPresent(join(this.#dir, fileName(generation)))
    this.#older = []
  }

  /** Whether enough was appended since the last rewrite that the next one is due. */
  get rewriteDue(): boolean {
    return !this.#rewriting && this.#appendedBytes >= this.#dueAt
  }

  /** Appends whole lines; a failure is reported, never thrown: the answer has gone out already. */
  append(lines: Buffer): void {
    this.#during?.push(lines)
    this.#appendedBytes += lines.length
    // Named now, not when the file opens: a rewrite asked for meanwhile takes the next number.
    if (this.#generation === 0) this.#generation = 1
    this.#file.queue(async () => {
      if (!this.#file.isOpen) await this.#file.open(this.#path(), { syncPrevious: false })
      this.#file.put(lines)
    })
    this.#file.syncSoon()
  }

  /**
   * Rewrites the file as `lines` (what memory holds, each ending in a line feed) under the
   * next generation, taking LINES_PER_PIECE of them between turns of the event loop. The
   * caller fixes what `lines` yields before calling (a copy of the records, made into
   * lines as they are taken); lines appended from then on reach the new file after them.
   */
  async rewrite(lines: Iterable<string>): Promise<void> {
    if (this.#rewriting) return
    this.#rewriting = true
    try {
      await this.#rewrite(lines)
    } finally {
      this.#rewriting = false
    }
  }

  async #rewrite(lines: Iterable<string>): Promise<void> {
    this.#during = []
    const previous = this.#generation
    const next = previous + 1
    const path = join(this.#dir, fileName(next))
    // Where the lines appended from now on will start in the current file: its size once
    // the appends asked for so far are written, which happens in the order asked.
    const offset = await new Promise<number>((resolve) => this.#file.queue(async () => resolve(this.#file.size)))
    const mark: SnapshotMark = { after: { generation: previous, offset } }
    let bytes = 0
    const pieces = async function* () {
      let batch: string[] = [`${JSON.stringify(mark)}\n`]
      for (const line of lines) {
        batch.push(line)
        if (batch.length < LINES_PER_PIECE) continue
        const piece = Buffer.from(batch.join(''))
        batch = []
        bytes += piece.length
        yield piece
        await yieldToLoop()
      }
      const piece = Buffer.from(batch.join(''))
      bytes += piece.length
      yield piece
    }
    try {
      await replaceFileDurably(path, this.#dir, pieces(), 0o600)
    } catch (err) {
      this.#during = undefined
      // Not again at once (a full disk would fail each time): after as much again is appended.
      this.#dueAt = 2 * this.#appendedBytes
      throw err
    }
    // The switch waits its turn behind the appends asked for so far, which go to the old
    // file and are written again to the new one; later appends go to the new one only.
    const during = Buffer.concat(this.#during)
    this.#during = undefined
    const appendedBefore = this.#appendedBytes
    await new Promise<void>((resolve, reject) => {
      this.#file.queue(async () => {
        try {
          const hadOld = this.#file.isOpen
          const oldPath = this.#path()
          // The old file is not synced: it is removed once appends go to the new one.
          await this.#file.open(path, { syncPrevious: false })
          this.#generation = next
          this.#dueAt = Math.max(MIN_COMPACT_BYTES, bytes)
          // Past the rewritten part: the lines written again, and those asked for since.
          this.#appendedBytes = during.length + this.#appendedBytes - appendedBefore
          if (during.length > 0) {
            this.#file.put(during)
            this.#file.syncSoon()
          }
          if (hadOld) await unlinkIfPresent(oldPath)
          resolve()
        } catch (err) {
          reject(err)
        }
      })
    })
  }

  /** Writes back what was appended and closes; the next start reads it. */
  async close(): Promise<void> {
    await this.#file.close()
  }

  #path(): string {
    return join(this.#dir, fileName(this.#generation))
  }
}

function snapshotMarkOf(line: string): SnapshotMark['after'] | undefined {
  if (!line.startsWith('{"after":')) return undefined
  try {
    const { after } = JSON.parse(line) as Partial<SnapshotMark>
    if (after !== undefined && Number.isSafeInteger(after.generation) && Number.isSafeInteger(after.offset) && after.offset >= 0) return after
  } catch {
    // A damaged mark: read the older files whole, as for a file written before marks.
  }
  return undefined
}

function fileName(generation: number): string {
  return `refusals.${generation}.jsonl`
}
