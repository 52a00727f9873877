import { randomBytes } from 'node:crypto'
import { mkdir, readFile, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import type { Logger } from 'pino'
import type { Backends } from '../backends/index.js'
import { ConfigError, isUsableAdminToken, type Config } from '../config/index.js'
import type { SignalLog } from '../pipeline/index.js'
import type { Registry } from '../registry/index.js'
import { replaceFileDurably, type OpenKvBucket } from '../storage/index.js'

/** What every role's part of the service is built on: the backends one process opens once. */
export interface ServiceCore {
  readonly config: Config
  readonly logger: Logger
  readonly dataDir: string
  readonly steps: StepTimer
  readonly registry: Registry
  readonly signalLog: SignalLog
  /** Buckets of the key-value port: files under DATA_DIR/kv here, NATS KV buckets in a cluster. */
  readonly openBucket: OpenKvBucket
  /** Which backends these are, and what differs between them. */
  readonly backends: Backends
  /** A part that cannot recover in place: stop reporting ready, and have the process restarted (exit 75). */
  readonly failFatally: (err: Error, message: string) => void
}

/** The admin token: from the environment, else the one kept in DATA_DIR, else a new one. */
export async function adminToken(config: Config, dataDir: string): Promise<{ token: string; file: string | undefined }> {
  if (config.ADMIN_TOKEN !== '') return { token: config.ADMIN_TOKEN, file: undefined }
  const file = join(dataDir, 'admin-token')
  let kept: string | undefined
  try {
    kept = (await readFile(file, 'utf8')).trim()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  if (kept !== undefined) {
    // An empty or edited file would otherwise become an admin token nobody can use, or anybody can guess.
    if (!isUsableAdminToken(kept)) throw new ConfigError(`${file} does not hold a usable admin token: delete it to have a new one generated, or set ADMIN_TOKEN`)
    return { token: kept, file }
  }
  const token = `sgw_admin_${randomBytes(32).toString('base64url')}`
  // Written whole or not at all (temporary file, fsync, rename), so a crash cannot leave it empty.
  await replaceFileDurably(file, dataDir, Buffer.from(`${token}\n`), 0o600)
  return { token, file }
}

/**
 * `mkdir -p`, one level at a time: Node's own recursive mkdir never settles for a path
 * under /proc (measured with Node 20), which would hang the start instead of failing it.
 */
export async function makeDir(path: string): Promise<void> {
  try {
    await mkdir(path, { mode: 0o700 })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EEXIST') {
      if ((await stat(path)).isDirectory()) return
      throw err
    }
    if (code !== 'ENOENT' || dirname(path) === path) throw err
    await makeDir(dirname(path))
    await mkdir(path, { mode: 0o700 }).catch((again: NodeJS.ErrnoException) => {
      if (again.code !== 'EEXIST') throw again
    })
  }
}

export interface StepTimer {
  time<T>(name: string, step: () => Promise<T>): Promise<T>
  report(): Record<string, number>
}

/** Times the start's steps for the start-up log line: each one, and the whole start so far. */
export function stepTimer(): StepTimer {
  const started = performance.now()
  const ms: Record<string, number> = {}
  return {
    async time(name, step) {
      const t0 = performance.now()
      try {
        return await step()
      } finally {
        ms[name] = Math.round(performance.now() - t0)
      }
    },
    report: () => ({ ...ms, total: Math.round(performance.now() - started) }),
  }
}

/**
 * The log's last sequence number, read every `intervalMs`, for a process that does not
 * append (the recorder's lag, the metrics): in a cluster other processes append, so the
 * end is asked of the log rather than counted here.
 */
export async function followLogEnd(log: SignalLog, intervalMs: number, onError: (err: unknown) => void): Promise<{ readonly lastSeq: () => number; stop(): void }> {
  let lastSeq = (await log.info()).lastSeq
  const timer = setInterval(() => {
    log.info().then((info) => (lastSeq = info.lastSeq), onError)
  }, intervalMs).unref()
  return { lastSeq: () => lastSeq, stop: () => clearInterval(timer) }
}
