import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
// The flags' own file: the configuration's entry would load its schema library into every test.
import { NODE_FLAGS } from '../config/node-flags.js'

/**
 * The built gateway as a child process on 127.0.0.1, for the integration tests
 * (test/helpers/gateway-process.ts) and the ingest benchmark (bench/ingest/gateway-process.ts).
 * It is compiled into dist/, unlike test/, because the benchmark runs from there.
 */

/** `dist/service/main.js`, the bundled entry, from wherever this file runs. */
function gatewayMain(): string {
  const here = import.meta.url
  // As source (harness/, a test run through a TypeScript loader).
  if (here.endsWith('.ts')) return fileURLToPath(new URL('../dist/service/main.js', here))
  // Compiled for the tests (dist-test/harness/), whose own service/main.js is not the bundle.
  if (here.includes('/dist-test/')) return fileURLToPath(new URL('../../dist/service/main.js', here))
  // Built (dist/harness/: the bench, `npm run cluster`).
  return fileURLToPath(new URL('../service/main.js', here))
}
export const GATEWAY_MAIN = gatewayMain()
const START_TIMEOUT_MS = 30_000
/** Above the gateway's default SHUTDOWN_GRACE_MS, so a clean drain is never cut short. */
const STOP_TIMEOUT_MS = 20_000
const START_POLL_MS = 50

export type GatewayExit = { readonly code: number | null; readonly signal: NodeJS.Signals | null }

export interface LaunchOptions {
  /** Variables over the launcher's PATH, PORT, HOST, DATA_DIR and ADMIN_TOKEN. */
  env?: Record<string, string>
  /** Node flags after the gateway's own (NODE_FLAGS). */
  nodeArgs?: string[]
  /** An earlier gateway's, to restart on its state. Omitted: a new folder, which `removeDataDir` deletes. */
  dataDir?: string
  /** Omitted: a random one. '' leaves the gateway to make one and write it into DATA_DIR. */
  adminToken?: string
  /**
   * Omitted: PORT=0, so the kernel picks one that nothing can take before the gateway binds
   * it, and the gateway's "listening" or "ready" log line says which and when: that needs
   * LOG_LEVEL info or lower. Given (`freePort()`): /readyz says when, whatever LOG_LEVEL hides.
   */
  port?: number
  /** 'ready' (the default): its state is rebuilt and it takes signals; 'listening': it accepts connections. */
  until?: 'listening' | 'ready'
  /** RLIMIT_FSIZE (util-linux prlimit): a write past it fails with EFBIG, a real failed journal write without filling a disk. */
  fileSizeLimitBytes?: number
  /** Keep only the last this many lines of output, so a long run at a verbose LOG_LEVEL does not fill memory. */
  outputLines?: number
}

export interface LaunchedGateway {
  readonly url: string
  readonly port: number
  readonly pid: number
  readonly adminToken: string
  readonly dataDir: string
  readonly env: Readonly<Record<string, string>>
  readonly proc: ChildProcess
  /** Lines the process wrote to stdout (pino JSON) and stderr, as they come. */
  readonly output: readonly string[]
  /** Resolves with its code and signal once the process has exited and its output is read. */
  exited(): Promise<GatewayExit>
  /** SIGKILL unless it has exited; resolves once it has. */
  kill(): Promise<void>
  /** SIGTERM, then SIGKILL after STOP_TIMEOUT_MS; resolves with how it ended. */
  stop(): Promise<string>
  /** Deletes DATA_DIR if the launcher made it: a `dataDir` passed in is the caller's. */
  removeDataDir(): Promise<void>
}

/** A port that was free a moment ago: bind port 0, read it, release it. */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (address === null || typeof address === 'string') throw new Error('could not pick a free port')
  return address.port
}

/**
 * Starts the gateway and resolves once it is up as `until` says. Should it exit first or
 * take too long, it is killed, a DATA_DIR made here is removed, and this rejects with its output.
 */
export async function launchGateway(options: LaunchOptions = {}): Promise<LaunchedGateway> {
  const until = options.until ?? 'ready'
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'sgw-gateway-')))
  const removeDataDir = async () => {
    if (options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
  }
  const adminToken = options.adminToken ?? `admin_${randomBytes(16).toString('hex')}`
  const env = { PATH: process.env['PATH'] ?? '', PORT: String(options.port ?? 0), HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: adminToken, ...options.env }
  // Under tap, every child gets tap's process-info hook through NODE_OPTIONS (tap wraps
  // spawn to add it, whatever env is passed). In the gateway it cost about 1 s of CPU per
  // start (the bundle's source map read, the hooks), so `env -u` leaves it out; it also
  // kept SIGXFSZ from ending a process past its file size limit (the hook re-raises it).
  const command = ['env', '-u', 'NODE_OPTIONS', process.execPath, ...NODE_FLAGS, ...(options.nodeArgs ?? []), GATEWAY_MAIN]
  if (options.fileSizeLimitBytes !== undefined) command.splice(3, 0, 'prlimit', `--fsize=${options.fileSizeLimitBytes}`, '--')
  const proc = spawn(command[0]!, command.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] })
  // 'close', not 'exit': the last lines it wrote are in `output` by then.
  const exit = new Promise<GatewayExit>((resolve) => proc.once('close', (code, signal) => resolve({ code, signal })))
  const running = () => proc.exitCode === null && proc.signalCode === null
  const kill = async () => {
    if (running()) proc.kill('SIGKILL')
    await exit
  }
  const output: string[] = []
  const keep = (line: string) => {
    output.push(line)
    if (options.outputLines !== undefined && output.length > options.outputLines) output.shift()
  }
  readLines(proc.stdout!, keep)
  readLines(proc.stderr!, keep)

  const awaitedLine = until === 'listening' ? '"gateway listening' : '"gateway ready"'
  const portOnceUp = async (): Promise<number | undefined> => {
    if (options.port === undefined) {
      const line = output.find((l) => l.includes(awaitedLine))
      return line === undefined ? undefined : (JSON.parse(line) as { port: number }).port
    }
    const res = await fetch(`http://127.0.0.1:${options.port}/readyz`).catch(() => undefined) // not listening yet
    await res?.arrayBuffer()
    return res !== undefined && (res.status === 200 || until === 'listening') ? options.port : undefined
  }
  const deadline = Date.now() + START_TIMEOUT_MS
  let port: number | undefined
  while ((port = await portOnceUp()) === undefined) {
    const failure = !running() ? `exited (${proc.exitCode ?? proc.signalCode}) before it was ${until}` : Date.now() > deadline ? `not ${until} after ${START_TIMEOUT_MS} ms` : undefined
    if (failure !== undefined) {
      await kill()
      await removeDataDir()
      throw new Error(`gateway ${failure}:\n${output.join('\n')}`)
    }
    await sleep(START_POLL_MS)
  }

  let stopping: Promise<string> | undefined
  const stop = () =>
    (stopping ??= (async () => {
      if (!running()) return `had already exited (${describe(await exit)})`
      const t0 = Date.now()
      proc.kill('SIGTERM')
      const timer = setTimeout(() => proc.kill('SIGKILL'), STOP_TIMEOUT_MS)
      const how = `${describe(await exit)} after SIGTERM, ${Date.now() - t0} ms`
      clearTimeout(timer)
      return how
    })())
  return { url: `http://127.0.0.1:${port}`, port, pid: proc.pid as number, adminToken, dataDir, env, proc, output, exited: () => exit, kill, stop, removeDataDir }
}

function readLines(stream: Readable, onLine: (line: string) => void): void {
  let partial = ''
  stream.setEncoding('utf8')
  stream.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n')
    partial = lines.pop()!
    for (const line of lines) onLine(line)
  })
  stream.on('end', () => {
    if (partial !== '') onLine(partial)
  })
}

function describe({ code, signal }: GatewayExit): string {
  return signal !== null ? `signal ${signal}` : `code ${code}`
}
