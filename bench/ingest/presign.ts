import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import type { SignedChunk, SignJob } from './presign-worker.js'
import type { SourceKey } from './protocol.js'

/** Pre-signed requests for one phase, handed out once each. */
export class RequestPool {
  readonly #chunks: { data: Buffer; ends: Uint32Array }[]
  #chunk = 0
  #index = 0
  /** Shed requests put back: the gateway never verified them, so their nonces are unspent. */
  readonly #returned: Buffer[] = []
  readonly size: number

  constructor(chunks: SignedChunk[]) {
    this.#chunks = chunks.map((c) => ({ data: Buffer.from(c.data), ends: c.ends }))
    this.size = chunks.reduce((n, c) => n + c.ends.length, 0)
  }

  /** The next unsent request (a view into the chunk, no copy), or undefined when all are used. */
  take(): Buffer | undefined {
    const back = this.#returned.pop()
    if (back !== undefined) return back
    for (;;) {
      const chunk = this.#chunks[this.#chunk]
      if (chunk === undefined) return undefined
      if (this.#index < chunk.ends.length) {
        const start = this.#index === 0 ? 0 : (chunk.ends[this.#index - 1] as number)
        const end = chunk.ends[this.#index] as number
        this.#index++
        return chunk.data.subarray(start, end)
      }
      this.#chunk++
      this.#index = 0
    }
  }

  giveBack(request: Buffer): void {
    this.#returned.push(request)
  }
}

/** One signing worker per core; they sit idle while a phase runs. */
export class Presigner {
  readonly #workers: Worker[]
  #next = 0

  constructor(threads = availableParallelism()) {
    const file = new URL('./presign-worker.js', import.meta.url)
    this.#workers = Array.from({ length: Math.max(1, threads) }, () => new Worker(file))
  }

  /** Signs `count` requests spread over the sources; returns them in index order. */
  async sign(port: number, sources: SourceKey[], tag: string, count: number): Promise<RequestPool> {
    const per = Math.ceil(count / this.#workers.length)
    const jobs = this.#workers.map((worker, w) => {
      const first = this.#next + w * per
      const n = Math.max(0, Math.min(per, count - w * per))
      const job: SignJob = { port, sources, tag, first, count: n }
      return new Promise<SignedChunk>((resolve, reject) => {
        const onError = (err: Error) => {
          worker.off('message', onMessage)
          reject(err)
        }
        const onMessage = (chunk: SignedChunk) => {
          worker.off('error', onError)
          resolve(chunk)
        }
        worker.once('message', onMessage)
        worker.once('error', onError)
        worker.postMessage(job)
      })
    })
    this.#next += count
    return new RequestPool(await Promise.all(jobs))
  }

  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.terminate()))
  }
}
