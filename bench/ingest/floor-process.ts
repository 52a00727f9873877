import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { freePort } from '../../harness/gateway-launcher.js'

const ENTRY = fileURLToPath(new URL('./floor-server.js', import.meta.url))
const START_TIMEOUT_MS = 10_000

/** The latency floor's server (floor-server.ts) as its own process on a free port. */
export interface FloorServer {
  readonly port: number
  stop(): void
}

export async function startFloorServer(): Promise<FloorServer> {
  const port = await freePort()
  const proc = spawn(process.execPath, [ENTRY, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('floor server did not start')), START_TIMEOUT_MS)
    proc.once('exit', (code) => reject(new Error(`floor server exited (${code}) before it was ready`)))
    proc.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) {
        clearTimeout(timer)
        resolve()
      }
    })
  })
  return { port, stop: () => proc.kill('SIGKILL') }
}
