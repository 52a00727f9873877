/**
 * One gateway per data folder. Two processes on one journal would each keep their own
 * sequence counter and file offset and write over each other's records, losing signals
 * that already got a 202; two on one registry would lose each other's changes.
 *
 * Node has no flock, so this is a lock file in the manner of PostgreSQL's postmaster.pid:
 * created exclusively, naming its holder by pid, boot id and the process's start time,
 * so that a holder killed with `kill -9` (the file stays) is told apart from a live one,
 * also when its pid has since been reused or the machine rebooted.
 *
 * Limits: pids are compared within one pid namespace, so two containers sharing one
 * volume are not told apart (run one gateway per volume); and three gateways starting
 * in the same milliseconds over a stale file can, in a narrow window, both believe
 * they hold it. A kernel lock (flock) would close both, but Node has none built in.
 */
import { readFileSync } from 'node:fs'
import { link, open, readFile, rename, stat, unlink } from 'node:fs/promises'
import { join } from 'node:path'

export const LOCK_FILE = 'gateway.lock'
/** A lock file still empty this long after it was written is a crashed start, not a starting one. */
const EMPTY_LOCK_GRACE_MS = 5_000

interface Holder {
  readonly pid: number
  readonly boot_id: string
  /** Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot. */
  readonly start_ticks: string
}

export class DataDirLockedError extends Error {
  readonly code = 'data_dir_locked'
  constructor(path: string, pid: number | undefined) {
    super(`${path} shows the data folder in use by ${pid === undefined ? 'a gateway that is starting' : `process ${pid}`}: one gateway per DATA_DIR`)
    this.name = 'DataDirLockedError'
  }
}

export interface DataDirLock {
  /** Removes the lock file if it is still this process's. */
  release(): Promise<void>
}

/** Takes the data folder for this process, or throws DataDirLockedError naming the holder. */
export async function lockDataDir(dir: string): Promise<DataDirLock> {
  const path = join(dir, LOCK_FILE)
  const mine = JSON.stringify(holderOf(process.pid))
  // A few rounds: each either takes the file, finds it held, or clears a stale one and tries again.
  for (let round = 0; round < 3; round++) {
    if (await createExclusive(path, mine)) return { release: () => releaseIf(path, mine) }
    const text = await readFile(path, 'utf8').catch(() => undefined)
    if (text === undefined) continue // released meanwhile
    const holder = parseHolder(text)
    if (holder === undefined) {
      const written = await stat(path).catch(() => undefined)
      if (written === undefined) continue // released meanwhile
      if (Date.now() - written.mtimeMs < EMPTY_LOCK_GRACE_MS) throw new DataDirLockedError(path, undefined)
    } else if (isAlive(holder)) {
      throw new DataDirLockedError(path, holder.pid)
    }
    await clearStale(path, text)
  }
  throw new DataDirLockedError(path, undefined)
}

async function createExclusive(path: string, content: string): Promise<boolean> {
  let fh
  try {
    fh = await open(path, 'wx', 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw err
  }
  try {
    await fh.writeFile(content)
    await fh.sync()
  } catch (err) {
    // An empty lock file left behind would refuse every start for the next few seconds.
    await fh.close().catch(() => undefined)
    await unlink(path).catch(() => undefined)
    throw err
  }
  await fh.close()
  return true
}

/**
 * Moves the stale file aside under a name of this process's own, then checks that what
 * it moved is what it judged stale: if another starter replaced the file in between,
 * its fresh lock goes back (link fails rather than overwrite) and this start gives way.
 */
async function clearStale(path: string, staleText: string): Promise<void> {
  const aside = `${path}.stale-${process.pid}`
  try {
    await rename(path, aside)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
    throw err
  }
  const moved = await readFile(aside, 'utf8')
  if (moved !== staleText) {
    await link(aside, path).catch(() => undefined)
    await unlink(aside)
    throw new DataDirLockedError(path, parseHolder(moved)?.pid)
  }
  await unlink(aside)
}

async function releaseIf(path: string, mine: string): Promise<void> {
  const text = await readFile(path, 'utf8').catch(() => undefined)
  if (text === mine) await unlink(path).catch(() => undefined)
}

function holderOf(pid: number): Holder {
  return { pid, boot_id: bootId() ?? '', start_ticks: procStat(pid)?.startTicks ?? '' }
}

function parseHolder(text: string): Holder | undefined {
  try {
    const h = JSON.parse(text) as Partial<Holder>
    if (Number.isSafeInteger(h.pid) && typeof h.boot_id === 'string' && typeof h.start_ticks === 'string') return h as Holder
  } catch {
    // empty or cut short: a start that crashed or is under way
  }
  return undefined
}

/**
 * Live: same boot, and the pid still names the process that started then, and it has
 * not exited. A holder killed with `kill -9` stays a zombie until its parent reaps it
 * (seconds, under a container's init that reaps lazily): it holds nothing any more.
 */
function isAlive(holder: Holder): boolean {
  const boot = bootId()
  if (boot !== undefined && holder.boot_id !== '') {
    if (holder.boot_id !== boot) return false
    const stat = procStat(holder.pid)
    return stat !== undefined && stat.startTicks === holder.start_ticks && stat.state !== 'Z' && stat.state !== 'X'
  }
  // Without /proc, a signal 0 tells whether some process has the pid.
  try {
    process.kill(holder.pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  } catch {
    return undefined
  }
}

/** Fields 3 (state: R, S, D, Z for a zombie...) and 22 (start time) of /proc/<pid>/stat. */
function procStat(pid: number): { state: string; startTicks: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const [state, startTicks] = [fields[0], fields[19]]
    return state === undefined || startTicks === undefined ? undefined : { state, startTicks }
  } catch {
    return undefined
  }
}
