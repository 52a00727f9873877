import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { FromLoadGenerator, PhaseResult, PhaseSpec, SourceKey, ToLoadGenerator } from './protocol.js'

const ENTRY = fileURLToPath(new URL('./load-generator.js', import.meta.url))

/** The orchestrator's handle on the forked load generator: one phase at a time, over IPC. */
export class LoadGeneratorProcess {
  readonly #child: ChildProcess
  #waiter: { onMessage: (m: FromLoadGenerator) => void; reject: (err: Error) => void } | undefined
  readonly #exited: Promise<void>

  private constructor(child: ChildProcess) {
    this.#child = child
    child.on('message', (m: FromLoadGenerator) => {
      if (m.kind === 'error') this.#waiter?.reject(new Error(`load generator: ${m.message}`))
      else this.#waiter?.onMessage(m)
    })
    this.#exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.#waiter?.reject(new Error(`load generator exited (${signal ?? code})`))
        resolve()
      }),
    )
  }

  get pid(): number {
    return this.#child.pid as number
  }

  static async start(port: number, sources: SourceKey[], tag: string): Promise<LoadGeneratorProcess> {
    // The load generator's pauses would be measured as the gateway's latency, so it
    // collects its garbage before each timed window (--expose-gc, load-generator.ts) and
    // gets a young generation large enough that scavenges inside a window are rare.
    const lg = new LoadGeneratorProcess(fork(ENTRY, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...process.execArgv, '--expose-gc', '--max-semi-space-size=64'] }))
    await lg.#request({ kind: 'init', port, sources, tag }, (m) => (m.kind === 'ready' ? true : undefined))
    return lg
  }

  /** Runs one phase; `started` fires when the load generator starts its clock (after signing and connecting). */
  phase(spec: PhaseSpec, started: () => void): Promise<PhaseResult> {
    return this.#request({ kind: 'phase', spec }, (m) => {
      if (m.kind === 'started') started()
      return m.kind === 'result' ? m.result : undefined
    })
  }

  async close(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.connected) this.#child.send({ kind: 'exit' } satisfies ToLoadGenerator)
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 5_000)
    await this.#exited
    clearTimeout(timer)
  }

  #request<T>(message: ToLoadGenerator, pick: (m: FromLoadGenerator) => T | undefined): Promise<T> {
    if (this.#waiter !== undefined) throw new Error('one load generator request at a time')
    return new Promise<T>((resolve, reject) => {
      this.#waiter = {
        onMessage: (m) => {
          const value = pick(m)
          if (value === undefined) return
          this.#waiter = undefined
          resolve(value)
        },
        reject: (err) => {
          this.#waiter = undefined
          reject(err)
        },
      }
      this.#child.send(message)
    })
  }
}
