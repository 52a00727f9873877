import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadConfig, NODE_FLAGS, type Config } from '../../config/index.js'
import { GATEWAY_NODE_ARGS } from './options.js'

/**
 * The gateway under test, as its own process (`dist/main.js`) on 127.0.0.1 with a
 * throwaway DATA_DIR. The port is picked here rather than read from the log, because
 * LOG_LEVEL=warn keeps the gateway from writing a line per request into a pipe that
 * could fill and stall it.
 */

const MAIN = fileURLToPath(new URL('../../main.js', import.meta.url))
const START_TIMEOUT_MS = 30_000
/** Above the gateway's default SHUTDOWN_GRACE_MS, so a clean drain is never cut short. */
const STOP_TIMEOUT_MS = 20_000
/** Lines of gateway output kept to explain a failure. */
const OUTPUT_LINES = 50

export interface BenchGateway {
  readonly url: string
  readonly port: number
  readonly pid: number
  readonly adminToken: string
  readonly dataDir: string
  /** The configuration the gateway runs with, as its own loader reads it. */
  readonly config: Config
  /** The last lines it wrote to stdout and stderr. */
  output(): string[]
  /** SIGTERM, wait (SIGKILL after a timeout), remove DATA_DIR; resolves with how it ended. */
  stop(): Promise<string>
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

async function waitReady(url: string, proc: ChildProcess, output: () => string[]): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      throw new Error(`gateway exited (${proc.exitCode ?? proc.signalCode}) before it was ready:\n${output().join('\n')}`)
    }
    try {
      const res = await fetch(`${url}/readyz`)
      await res.arrayBuffer()
      if (res.status === 200) return
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`gateway not ready after ${START_TIMEOUT_MS} ms:\n${output().join('\n')}`)
}

/** Starts the gateway with the bench's defaults, overridden by `env`. */
export async function startGateway(env: Record<string, string> = {}): Promise<BenchGateway> {
  const port = await freePort()
  const dataDir = await mkdtemp(join(tmpdir(), 'sgw-bench-'))
  const adminToken = `admin_${randomBytes(16).toString('hex')}`
  const childEnv: Record<string, string> = {
    PATH: process.env['PATH'] ?? '',
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    ADMIN_TOKEN: adminToken,
    LOG_LEVEL: 'warn',
    // The bench's sources declare the schema's highest max_rate (provision.ts), so the
    // rate limiter never answers for the gateway.
    INGEST_MAX_RATE_PER_S: '100000',
    INGEST_MAX_BURST: '100000',
    ...env,
  }
  // The gateway's own loader: the printed configuration is exactly what it will run with.
  const config = loadConfig(childEnv)
  const proc = spawn(process.execPath, [...NODE_FLAGS, ...GATEWAY_NODE_ARGS, MAIN], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
  const lines: string[] = []
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(line)
    if (lines.length > OUTPUT_LINES) lines.splice(0, lines.length - OUTPUT_LINES)
  }
  proc.stdout?.on('data', keep)
  proc.stderr?.on('data', keep)
  const exited = new Promise<string>((resolve) => proc.once('exit', (code, signal) => resolve(signal !== null ? `signal ${signal}` : `code ${code}`)))
  const url = `http://127.0.0.1:${port}`
  try {
    await waitReady(url, proc, () => lines)
  } catch (err) {
    proc.kill('SIGKILL')
    await rm(dataDir, { recursive: true, force: true })
    throw err
  }
  let stopping: Promise<string> | undefined
  return {
    url,
    port,
    pid: proc.pid as number,
    adminToken,
    dataDir,
    config,
    output: () => [...lines],
    stop: () =>
      (stopping ??= (async () => {
        let how: string
        if (proc.exitCode !== null || proc.signalCode !== null) how = `had already exited (${await exited})`
        else {
          const started = Date.now()
          proc.kill('SIGTERM')
          const timer = setTimeout(() => proc.kill('SIGKILL'), STOP_TIMEOUT_MS)
          how = `${await exited} after SIGTERM, ${Date.now() - started} ms`
          clearTimeout(timer)
        }
        await rm(dataDir, { recursive: true, force: true })
        return how
      })()),
  }
}
