import { randomBytes } from 'node:crypto'
import { appendFile, mkdir, open, readdir, readFile, rm, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32c } from '../../../storage/index.js'
import { replaceFileDurably, unlinkIfPresent } from '../../../storage/index.js'
import type { SignalLog } from '../../log.js'
import { readBatches, readRecord } from '../../log-reads.js'
import { FingerprintSet } from './fingerprint-set.js'
import { PendingFrame, readTailFrames, TAIL_FILE } from './history-tail.js'
import { keyedHash64 } from './string-hash.js'

/** Generations kept: the oldest goes whole once the newest fills, so memory stays within `maxEntries`. */
const GENERATIONS = 8
const SECRET_FILE = 'secret'
const MAGIC = 0x31484953 // "SIH1", little-endian
const HEADER_BYTES = 8
const GENERATION_FILE = /^gen-(\d{1,16})-(\d{1,16})\.bin$/
/** How often the generation under way is appended to its tail file: a crash costs a restart this much more reading. */
const TAIL_WRITE_MS = 1000

/** A signal's fingerprint, taken once per signal for both the look-up and the add. */
export interface Fingerprint {
  readonly hi: number
  readonly lo: number
}

interface Generation {
  readonly set: FingerprintSet
  /** Log sequences of the first and last signal added (0 while empty). */
  firstSeq: number
  lastSeq: number
}

export interface SignalIdHistoryOptions {
  /** Folder of its own (DATA_DIR/signal-ids). */
  readonly dir: string
  /** Signal ids remembered at most, newest kept; about 11 to 21 bytes each. */
  readonly maxEntries: number
  readonly log: SignalLog
  readonly onWarning: (message: string, err: unknown) => void
}

/**
 * Every (source, signal_id) the log accepted, remembered long after the dedup window,
 * so that a signal id reused later is refused (400 invalid_signal_id: a `signal_id` is unique per source)
 * instead of becoming a second signal that consumers must drop. The dedup window
 * compares bodies and answers retries; this only answers "seen before?".
 *
 * Held as 64-bit keyed fingerprints (SHA-256 under a secret kept in `dir`, so creators
 * cannot choose ids that collide or pile up in one probe chain; a false "seen" needs a
 * 64-bit collision) in generations of `maxEntries / 8`. A full generation is sealed and
 * written to its own file once; the oldest is dropped when a ninth would begin. The
 * generation under way is appended to a tail file every second (./history-tail.ts). On
 * start the sealed files and the tail are read, and only what they miss comes from the log.
 */
export class SignalIdHistory {
  readonly #o: SignalIdHistoryOptions
  readonly #perGeneration: number
  readonly #secret: string
  readonly #sealed: Generation[] = []
  #current: Generation = { set: new FingerprintSet(), firstSeq: 0, lastSeq: 0 }
  readonly #hash = new Uint32Array(2)
  /** Added to the generation under way since its tail was last written. */
  readonly #pending = new PendingFrame()
  #tailTimer: NodeJS.Timeout | undefined
  /** A tail write failed: later frames would not chain, so none is written until the next generation. */
  #tailBroken = false
  /** File writes and deletions, one after another. */
  #files: Promise<void> = Promise.resolve()

  private constructor(options: SignalIdHistoryOptions, secret: string) {
    this.#o = options
    this.#perGeneration = Math.max(1, Math.ceil(options.maxEntries / GENERATIONS))
    this.#secret = secret
  }

  static async open(options: SignalIdHistoryOptions): Promise<SignalIdHistory> {
    await mkdir(options.dir, { recursive: true })
    const { secret, fresh } = await readOrCreateSecret(options.dir)
    const history = new SignalIdHistory(options, secret)
    await history.#load(fresh)
    history.#writeTail()
    history.#tailTimer = setInterval(() => history.#writeTail(), TAIL_WRITE_MS).unref()
    return history
  }

  /** The fingerprint of a dedup id (`<source_id>/<signal_id>`). */
  fingerprint(dedupId: string): Fingerprint {
    keyedHash64(this.#secret, dedupId, this.#hash)
    // Both halves zero marks an empty slot.
    return { hi: this.#hash[0] as number, lo: (this.#hash[1] as number) || 1 }
  }

  /** Whether the log holds a signal with this fingerprint. */
  has({ hi, lo }: Fingerprint): boolean {
    if (this.#current.set.has(hi, lo)) return true
    for (const g of this.#sealed) if (g.set.has(hi, lo)) return true
    return false
  }

  /** Remembers a signal the log now holds at `seq`. */
  add({ hi, lo }: Fingerprint, seq: number): void {
    const current = this.#current
    // The tail's frames claim every seq in their range: one that skips or comes late
    // ends the frames of this generation (a restart reads the rest from the log).
    if (current.firstSeq !== 0 && seq !== current.lastSeq + 1) this.#tailBroken = true
    current.set.add(hi, lo)
    if (current.firstSeq === 0) current.firstSeq = seq
    current.lastSeq = Math.max(current.lastSeq, seq)
    this.#pending.push(hi, lo, seq)
    if (current.set.size >= this.#perGeneration) this.#seal()
  }

  /** Writes what is pending and waits for every file. */
  async close(): Promise<void> {
    clearInterval(this.#tailTimer)
    this.#writeTail()
    await this.#files
  }

  #writeTail(): void {
    if (this.#pending.empty) return
    if (this.#tailBroken) return this.#pending.clear()
    const frame = this.#pending.take(this.#current.firstSeq)
    this.#files = this.#files.then(async () => {
      try {
        await appendFile(join(this.#o.dir, TAIL_FILE), frame)
      } catch (err) {
        this.#tailBroken = true
        this.#o.onWarning('could not write the signal-id history tail: a restart reads this generation back from the log', err)
      }
    })
  }

  #seal(): void {
    const sealed = this.#current
    this.#sealed.push(sealed)
    this.#current = { set: new FingerprintSet(), firstSeq: 0, lastSeq: 0 }
    const dropped = this.#sealed.length > GENERATIONS - 1 ? this.#sealed.shift() : undefined
    // The sealed file holds all of it; the next generation's tail starts afresh.
    this.#pending.clear()
    this.#tailBroken = false
    this.#writeSealed(sealed, async () => {
      await unlinkIfPresent(join(this.#o.dir, TAIL_FILE))
      if (dropped !== undefined) await unlink(join(this.#o.dir, fileName(dropped)))
    })
  }

  /** Writes a sealed generation's file, then `after`, in turn with the other file work. */
  #writeSealed(sealed: Generation, after: () => Promise<void> = async () => undefined): void {
    this.#files = this.#files.then(async () => {
      try {
        await replaceFileDurably(join(this.#o.dir, fileName(sealed)), this.#o.dir, encode(sealed.set))
        await after()
      } catch (err) {
        // The log still holds these signals: a restart without the file reads them back from it.
        this.#o.onWarning('could not write a signal-id history file', err)
      }
    })
  }

  async #load(freshSecret: boolean): Promise<void> {
    const info = await this.#o.log.info()
    const files = (await readdir(this.#o.dir))
      .map((name) => ({ name, m: GENERATION_FILE.exec(name) }))
      .filter((f): f is { name: string; m: RegExpExecArray } => f.m !== null)
      .map((f) => ({ name: f.name, firstSeq: Number(f.m[1]), lastSeq: Number(f.m[2]) }))
      .sort((a, b) => a.firstSeq - b.firstSeq)
    // Fingerprints under another secret mean nothing now; files past the kept generations are left over.
    const kept = freshSecret ? [] : files.slice(-(GENERATIONS - 1))
    for (const f of files.slice(0, files.length - kept.length)) await unlink(join(this.#o.dir, f.name)).catch(() => undefined)
    for (const f of kept) {
      // Under fsync 'interval' or 'never' a file can reach the disk before the records it
      // names: after a power cut it describes signals the log no longer holds, at seqs
      // new signals will take.
      const problem = f.lastSeq > info.lastSeq ? 'reaches past the end of the signal log' : undefined
      const set = problem === undefined ? await this.#readGeneration(f.name) : undefined
      if (set === undefined) {
        this.#o.onWarning(`signal-id history file ${f.name} ${problem ?? 'is damaged or unreadable'}: dropped, and what the log still holds of it is read back`, undefined)
        await unlink(join(this.#o.dir, f.name)).catch(() => undefined)
        continue
      }
      this.#sealed.push({ set, firstSeq: f.firstSeq, lastSeq: f.lastSeq })
    }
    await this.#fillGaps()
    // What no file covers is read from the log: after the last file, or with none, as far
    // back as the history reaches.
    const last = this.#sealed[this.#sealed.length - 1]
    let from = Math.max(last !== undefined ? last.lastSeq + 1 : info.lastSeq - this.#o.maxEntries + 1, info.firstSeq, 1)
    if (!freshSecret) from = await this.#loadTail(from, info.lastSeq)
    else await unlinkIfPresent(join(this.#o.dir, TAIL_FILE))
    await this.#readLog(from, Number.POSITIVE_INFINITY, (fingerprint, seq) => this.add(fingerprint, seq))
  }

  async #readGeneration(name: string): Promise<FingerprintSet | undefined> {
    try {
      return decode(await readFile(join(this.#o.dir, name)))
    } catch {
      return undefined
    }
  }

  /**
   * A generation file that is missing (its write failed, or it was dropped above) leaves
   * a gap between its neighbours. The gap is read back from the log as a generation of
   * its own, so an id the log still holds is not forgotten. Files that overlap are not
   * from one history: only the newest run that does not is kept.
   */
  async #fillGaps(): Promise<void> {
    const sealed = this.#sealed
    let run = sealed.length
    while (run > 1 && (sealed[run - 2] as Generation).lastSeq < (sealed[run - 1] as Generation).firstSeq) run--
    if (run > 1) for (const g of sealed.splice(0, run - 1)) await unlink(join(this.#o.dir, fileName(g))).catch(() => undefined)
    for (let i = 1; i < sealed.length; i++) {
      const before = sealed[i - 1] as Generation
      const after = sealed[i] as Generation
      if (before.lastSeq + 1 === after.firstSeq) continue
      const gap: Generation = { set: new FingerprintSet(), firstSeq: before.lastSeq + 1, lastSeq: after.firstSeq - 1 }
      await this.#readLog(gap.firstSeq, gap.lastSeq, ({ hi, lo }) => gap.set.add(hi, lo))
      sealed.splice(i, 0, gap)
      i++
      this.#writeSealed(gap)
    }
    while (sealed.length > GENERATIONS - 1) {
      const dropped = sealed.shift() as Generation
      await unlink(join(this.#o.dir, fileName(dropped))).catch(() => undefined)
    }
  }

  /** Feeds the fingerprints of the log's records from `from` to `to` (both included). */
  async #readLog(from: number, to: number, add: (fingerprint: Fingerprint, seq: number) => void): Promise<void> {
    for await (const batch of readBatches(this.#o.log, { fromSeq: from }, to)) {
      // Every seq, dispute placements included (their dedup ids are no signal's): frames claim every seq of their range.
      for (const r of batch) add(this.fingerprint(r.dedupId), r.seq)
    }
  }

  /**
   * Takes the generation under way from the tail file when it is the one that begins at
   * `from` and its last frame names the log's record at that seq; returns where reading
   * the log must go on from. Any other tail is left over (from before a seal, a lost
   * generation file, or a log that a power cut took back and new signals refilled) and
   * is deleted; being a cache, a tail that cannot be read costs only reading the log.
   */
  async #loadTail(from: number, logLastSeq: number): Promise<number> {
    const path = join(this.#o.dir, TAIL_FILE)
    let file: Buffer
    try {
      file = await readFile(path)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return from
      this.#o.onWarning('could not read the signal-id history tail: its generation is read back from the log', err)
      await rm(path, { recursive: true, force: true }).catch(() => undefined)
      return from
    }
    const tail = readTailFrames(file, logLastSeq)
    if (tail.generationFirstSeq !== from || !(await this.#endsAtLogRecord(tail.pairs, tail.lastSeq))) {
      await unlinkIfPresent(path)
      return from
    }
    // New frames must follow the last usable one, not bytes a crash left after it; synced,
    // so that a power cut cannot bring back frames of seqs new signals will take.
    if (tail.usableBytes < file.length) await truncateDurably(path, tail.usableBytes)
    this.#current = { set: FingerprintSet.fromPairs(tail.pairs), firstSeq: from, lastSeq: tail.lastSeq }
    return tail.lastSeq + 1
  }

  /** Whether the last fingerprint of `pairs` is the one of the log's record at `seq`. */
  async #endsAtLogRecord(pairs: Uint32Array, seq: number): Promise<boolean> {
    const record = await readRecord(this.#o.log, seq)
    if (record === undefined) return false
    const { hi, lo } = this.fingerprint(record.dedupId)
    return pairs[pairs.length - 2] === hi && pairs[pairs.length - 1] === lo
  }
}

async function truncateDurably(path: string, length: number): Promise<void> {
  const fh = await open(path, 'r+')
  try {
    await fh.truncate(length)
    await fh.datasync()
  } finally {
    await fh.close()
  }
}

function fileName(g: Generation): string {
  return `gen-${g.firstSeq}-${g.lastSeq}.bin`
}

function encode(set: FingerprintSet): Uint8Array {
  const pairs = set.toPairs()
  const body = new Uint8Array(pairs.buffer, pairs.byteOffset, pairs.byteLength)
  const out = Buffer.alloc(HEADER_BYTES + body.byteLength)
  out.writeUInt32LE(MAGIC, 0)
  out.writeUInt32LE(crc32c(body), 4)
  out.set(body, HEADER_BYTES)
  return out
}

/** The set in a generation file, or undefined if the file is not one intact. */
function decode(file: Buffer): FingerprintSet | undefined {
  if (file.byteLength < HEADER_BYTES || (file.byteLength - HEADER_BYTES) % 8 !== 0 || file.readUInt32LE(0) !== MAGIC) return undefined
  const body = new Uint8Array(file.buffer, file.byteOffset + HEADER_BYTES, file.byteLength - HEADER_BYTES)
  if (crc32c(body) !== file.readUInt32LE(4)) return undefined
  // Copied into an aligned buffer: a Uint32Array view needs a 4-byte aligned offset.
  return FingerprintSet.fromPairs(new Uint32Array(Uint8Array.from(body).buffer))
}

async function readOrCreateSecret(dir: string): Promise<{ secret: string; fresh: boolean }> {
  const path = join(dir, SECRET_FILE)
  try {
    const secret = (await readFile(path, 'utf8')).trim()
    if (/^[A-Za-z0-9_-]{22,}$/.test(secret)) return { secret, fresh: false }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  const secret = randomBytes(16).toString('base64url')
  await replaceFileDurably(path, dir, Buffer.from(secret), 0o600)
  return { secret, fresh: true }
}
