import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * Real `nats-server` processes with JetStream on 127.0.0.1, for the tests, the
 * benchmarks and `npm run cluster`: one server, or a cluster of three on loopback for
 * the fault tests. Each server gets a random client port and a throwaway store folder.
 * A missing `nats-server` is an error that says how to install it, never a skip.
 */

const START_TIMEOUT_MS = 15_000
const STOP_TIMEOUT_MS = 10_000

export interface NatsNode {
  /** `nats://127.0.0.1:<port>` */
  readonly url: string
  readonly port: number
  readonly storeDir: string
  pid(): number | undefined
  /** Lines the server wrote (its log goes to stderr), the last 2,000. */
  readonly output: readonly string[]
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>
  /** SIGTERM (lame-duck-less clean stop), and wait for the exit. */
  stop(): Promise<void>
  /** Starts it again on the same port and store (after `kill` or `stop`). */
  restart(): Promise<void>
  running(): boolean
}

export interface NatsCluster {
  readonly nodes: readonly NatsNode[]
  /** Every node's url, comma-separated, as NATS_URL takes them. */
  readonly urls: string
  /** Stops every node and removes the store folders. Safe to call twice. */
  close(): Promise<void>
}

/** Throws with the install command when `nats-server` is not on PATH. */
export function requireNatsServer(): string {
  const r = spawnSync('nats-server', ['--version'], { encoding: 'utf8' })
  if (r.error || r.status !== 0) {
    throw new Error('nats-server is not installed: `apt-get install -y nats-server` (Debian bookworm has 2.9.10), or put a nats-server 2.9+ on PATH')
  }
  return r.stdout.trim()
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0
      srv.close(() => resolve(port))
    })
  })
}

interface NodeSpec {
  readonly name: string
  readonly port: number
  readonly clusterPort?: number
  readonly routes?: readonly number[]
  readonly storeDir: string
  readonly configFile: string
  /** The log line after which the node serves JetStream requests. */
  readonly ready: RegExp
}

function configText(spec: NodeSpec): string {
  const lines = [
    `server_name: ${spec.name}`,
    `listen: 127.0.0.1:${spec.port}`,
    // Room for the largest value the KV port allows plus headers.
    'max_payload: 1048576',
    `jetstream { store_dir: "${spec.storeDir}" }`,
  ]
  if (spec.clusterPort !== undefined) {
    lines.push(
      'cluster {',
      '  name: sgw-test',
      `  listen: 127.0.0.1:${spec.clusterPort}`,
      `  routes: [${(spec.routes ?? []).map((p) => `"nats-route://127.0.0.1:${p}"`).join(', ')}]`,
      '}',
    )
  }
  return lines.join('\n') + '\n'
}

class LaunchedNode implements NatsNode {
  readonly url: string
  readonly port: number
  readonly storeDir: string
  readonly output: string[] = []
  readonly #spec: NodeSpec
  #proc: ChildProcess | undefined
  #exited: Promise<void> = Promise.resolve()

  constructor(spec: NodeSpec) {
    this.#spec = spec
    this.port = spec.port
    this.storeDir = spec.storeDir
    this.url = `nats://127.0.0.1:${spec.port}`
  }

  pid(): number | undefined {
    return this.#proc?.pid
  }

  running(): boolean {
    return this.#proc !== undefined && this.#proc.exitCode === null && this.#proc.signalCode === null
  }

  async start(): Promise<void> {
    const waitFor = this.#spec.ready
    const proc = spawn('nats-server', ['-c', this.#spec.configFile], { stdio: ['ignore', 'pipe', 'pipe'] })
    this.#proc = proc
    this.#exited = new Promise((resolve) => proc.once('exit', () => resolve()))
    let buffered = ''
    const seen = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`nats-server ${this.#spec.name} did not start in ${START_TIMEOUT_MS} ms:\n${this.output.slice(-20).join('\n')}`)), START_TIMEOUT_MS)
      const onData = (chunk: Buffer): void => {
        buffered += chunk.toString('utf8')
        let nl: number
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl)
          buffered = buffered.slice(nl + 1)
          this.output.push(line)
          if (this.output.length > 2000) this.output.splice(0, this.output.length - 2000)
          if (waitFor.test(line)) {
            clearTimeout(timer)
            resolve()
          }
        }
      }
      proc.stdout?.on('data', onData)
      proc.stderr?.on('data', onData)
      proc.once('exit', (code, signal) => {
        clearTimeout(timer)
        reject(new Error(`nats-server ${this.#spec.name} exited (${code ?? signal}) while starting:\n${this.output.slice(-20).join('\n')}`))
      })
      proc.once('error', (err) => {
        clearTimeout(timer)
        reject(err)
      })
    })
    await seen
  }

  async #signal(signal: NodeJS.Signals): Promise<void> {
    const proc = this.#proc
    if (!proc || !this.running()) return
    proc.kill(signal)
    const timer = setTimeout(() => proc.kill('SIGKILL'), STOP_TIMEOUT_MS)
    await this.#exited
    clearTimeout(timer)
  }

  kill(): Promise<void> {
    return this.#signal('SIGKILL')
  }

  stop(): Promise<void> {
    return this.#signal('SIGTERM')
  }

  async restart(): Promise<void> {
    await this.kill()
    await this.start()
  }
}

/** A single server logs this once JetStream and the client listener are up. */
const READY = /Server is ready/
/**
 * A clustered server answers JetStream requests only once the cluster has a metadata
 * leader ("Server is ready" comes first, and a request then times out).
 */
const CLUSTER_READY = /JetStream cluster new metadata leader|Self is new JetStream cluster metadata leader/

/** One server with JetStream on a random port and a throwaway store. */
export async function startNatsServer(): Promise<NatsCluster> {
  return startNats(1)
}

/** Three servers clustered on loopback, each with JetStream, for R3 streams. */
export async function startNatsCluster(): Promise<NatsCluster> {
  return startNats(3)
}

async function startNats(size: 1 | 3): Promise<NatsCluster> {
  requireNatsServer()
  const root = await mkdtemp(join(tmpdir(), 'sgw-nats-'))
  const ports: number[] = []
  const clusterPorts: number[] = []
  for (let i = 0; i < size; i++) {
    ports.push(await freePort())
    if (size > 1) clusterPorts.push(await freePort())
  }
  const nodes: LaunchedNode[] = []
  for (let i = 0; i < size; i++) {
    const spec: NodeSpec = {
      name: `n${i + 1}`,
      port: ports[i]!,
      storeDir: join(root, `n${i + 1}`),
      configFile: join(root, `n${i + 1}.conf`),
      ready: size > 1 ? CLUSTER_READY : READY,
      ...(size > 1 ? { clusterPort: clusterPorts[i]!, routes: clusterPorts.filter((_, j) => j !== i) } : {}),
    }
    await writeFile(spec.configFile, configText(spec))
    nodes.push(new LaunchedNode(spec))
  }
  let closed = false
  const close = async (): Promise<void> => {
    if (closed) return
    closed = true
    await Promise.all(nodes.map((n) => n.kill()))
    await rm(root, { recursive: true, force: true })
  }
  try {
    await Promise.all(nodes.map((n) => n.start()))
  } catch (err) {
    await close()
    throw err
  }
  return { nodes, urls: nodes.map((n) => n.url).join(','), close }
}
