import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { NODE_FLAGS } from '../../config/index.js'

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url))

export interface GatewayProcess {
  readonly url: string
  readonly port: number
  readonly adminToken: string
  readonly dataDir: string
  readonly proc: ChildProcess
  /** Lines the process wrote to stdout (pino JSON) and stderr. */
  readonly output: string[]
  /** Waits for the process to exit; resolves with its code and signal. */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

interface Teardown {
  teardown(fn: () => unknown): void
}

/**
 * Starts the built service (`dist/main.js`, built by `npm test`'s pretest) as a real
 * child process on a random port with a throwaway data folder, and stops it when the
 * test ends. Pass `dataDir` to restart on the same state. Resolves once the gateway is
 * ready (its state rebuilt), or with `until: 'listening'` as soon as it listens.
 */
export async function startGateway(
  t: Teardown,
  options: { dataDir?: string; env?: Record<string, string>; adminToken?: string; fileSizeLimitBytes?: number; until?: 'listening' | 'ready' } = {},
): Promise<GatewayProcess> {
  const awaited = options.until === 'listening' ? '"gateway listening' : '"gateway ready"'
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'sgw-test-')))
  if (options.dataDir === undefined) t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const adminToken = options.adminToken ?? `admin_${randomBytes(16).toString('hex')}`
  // RLIMIT_FSIZE (util-linux prlimit) makes a write past that size fail with EFBIG, a
  // real failed write of the journal without filling a disk. Node ignores SIGXFSZ, but
  // tap preloads its process-info hook into children through NODE_OPTIONS, and that
  // hook (signal-exit) catches SIGXFSZ and re-raises it: `env -u` leaves it out.
  const command = [process.execPath, ...NODE_FLAGS, MAIN]
  if (options.fileSizeLimitBytes !== undefined) command.unshift('env', '-u', 'NODE_OPTIONS', 'prlimit', `--fsize=${options.fileSizeLimitBytes}`, '--')
  const proc = spawn(command[0]!, command.slice(1), {
    env: { PATH: process.env['PATH'] ?? '', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: adminToken, LOG_LEVEL: 'info', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const output: string[] = []
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL')
      await exit
    }
  })
  const port = await new Promise<number>((resolve, reject) => {
    let buffered = ''
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${output.join('\n')}`)), 30_000)
    proc.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8')
      let nl
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl)
        buffered = buffered.slice(nl + 1)
        output.push(line)
        if (line.includes(awaited)) {
          clearTimeout(timer)
          resolve((JSON.parse(line) as { port: number }).port)
        }
      }
    })
    proc.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')))
    void exit.then(({ code, signal }) => {
      clearTimeout(timer)
      reject(new Error(`gateway exited (${code ?? signal}) before listening:\n${output.join('\n')}`))
    })
  })
  return { url: `http://127.0.0.1:${port}`, port, adminToken, dataDir, proc, output, exited: () => exit }
}
