import { open, type FileHandle } from 'node:fs/promises'
import { dirname } from 'node:path'
import { syncDir, writeFully } from '../../../storage/index.js'

/**
 * How long an appended line waits at most before it is synced: what a crash of the
 * machine (not of the process, whose writes the kernel keeps) can lose. One sync per
 * second at most, off the event loop, so a flood of lines costs ingest nothing.
 */
const SYNC_DELAY_MS = 1000

/**
 * A file of JSON lines written behind the answers (ingest errors, retry notes): whole
 * lines appended in the order asked, synced within SYNC_DELAY_MS and never line by line.
 * Failures are reported, never thrown: the answers have gone out already.
 */
export class AppendedLines {
  readonly #onError: (err: unknown) => void
  #handle: FileHandle | undefined
  /** Bytes in the current file: where the next line goes. */
  #size = 0
  #writing: Promise<void> = Promise.resolve()
  #syncTimer: NodeJS.Timeout | undefined

  constructor(onError: (err: unknown) => void) {
    this.#onError = onError
  }

  get isOpen(): boolean {
    return this.#handle !== undefined
  }

  /** Bytes in the current file; read it inside `queue` to see every append asked for before. */
  get size(): number {
    return this.#size
  }

  /** Runs file work in the order it was asked for, even across the awaits of opening a file. */
  queue(work: () => Promise<void>): void {
    this.#writing = this.#writing.then(work).catch(this.#onError)
  }

  /**
   * Makes `path` the file appended to (created if missing, its folder then synced) and
   * closes the one before, synced first if `syncPrevious`. A crash can leave a torn last
   * line: the next line then starts on a line of its own, or the two would read as one
   * bad line and the new one would be lost.
   */
  async open(path: string, options: { syncPrevious: boolean }): Promise<void> {
    const handle = await open(path, 'a+', 0o600)
    const size = (await handle.stat()).size
    if (size === 0) await syncDir(dirname(path))
    const previous = this.#handle
    this.#handle = handle
    this.#size = size
    const last = Buffer.alloc(1)
    if (size > 0 && (await handle.read(last, 0, 1, size - 1)).bytesRead === 1 && last[0] !== 10) this.put(Buffer.from('\n'))
    if (previous !== undefined) {
      if (options.syncPrevious) await previous.datasync()
      await previous.close()
    }
  }

  /** Writes whole lines at the end of the open file; call inside `queue`, after `open`. */
  put(lines: Buffer): void {
    writeFully((this.#handle as FileHandle).fd, lines, this.#size)
    this.#size += lines.length
  }

  /** Syncs the current file within SYNC_DELAY_MS, in its turn behind the appends. */
  syncSoon(): void {
    if (this.#syncTimer !== undefined) return
    this.#syncTimer = setTimeout(() => {
      this.#syncTimer = undefined
      this.queue(async () => {
        await this.#handle?.datasync()
      })
    }, SYNC_DELAY_MS)
    this.#syncTimer.unref()
  }

  /** Writes back what was asked for, syncs and closes. */
  async close(): Promise<void> {
    clearTimeout(this.#syncTimer)
    this.#syncTimer = undefined
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
