import { Agent, request } from 'node:http'
import { signPush, type SignedPush } from '../../harness/signed-push.js'
import type { BenchSource } from './setup.js'

/**
 * Signs and sends ingest requests from the process that also holds the subscribers, so a
 * signal's send time and its arrival on a stream are read from the same clock
 * (performance.now()). Keep-alive connections, as a creator's agent would hold.
 */

const TOKEN = 'So11111111111111111111111111111111111111112'

export class Pusher {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 64 })
  readonly #port: number
  /** signal_id -> performance.now() just before the request was written. */
  readonly sentAt = new Map<string, number>()
  /** signal_id -> performance.now() when the 202 arrived. */
  readonly ackedAt = new Map<string, number>()
  accepted = 0
  rejected = 0
  /** The first answer that was not 202, to explain the counts. */
  firstRejection: string | undefined
  /** Status (0: connection error) -> count, of the answers that were not 202. */
  readonly rejections: Record<number, number> = {}
  #n = 0

  constructor(url: string, readonly tag: string) {
    this.#port = Number(new URL(url).port)
  }

  #presigned: { signalId: string; signed: SignedPush }[] = []

  /** Signs `count` signals round-robin over `sources` now, so that sending them later costs no signing. */
  presign(sources: readonly BenchSource[], count: number): void {
    for (let i = 0; i < count; i++) this.#presigned.push(this.#sign(sources[i % sources.length]!))
    this.#presigned.reverse()
  }

  #sign(source: BenchSource): { signalId: string; signed: SignedPush } {
    // signal_id takes 8 to 128 characters: the counter is padded.
    const signalId = `bd-${this.tag}-${String(this.#n++).padStart(7, '0')}`
    const signed = signPush({
      sourceId: source.sourceId,
      keyId: source.keyId,
      key: source.key,
      payload: { signal_id: signalId, source_id: source.sourceId, ts: new Date().toISOString(), token: TOKEN, severity: 'warning', confidence: 80 },
    })
    return { signalId, signed }
  }

  /** One signed signal for `source` (a presigned one first, if any: they already name their source); resolves with the status (0 on a connection error). */
  push(source: BenchSource, track = true): Promise<number> {
    const { signalId, signed } = this.#presigned.pop() ?? this.#sign(source)
    return new Promise((resolve) => {
      const req = request({ host: '127.0.0.1', port: this.#port, method: 'POST', path: signed.path, agent: this.#agent, headers: { ...signed.headers, 'content-length': signed.body.length } }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (body += c))
        res.on('end', () => {
          if (res.statusCode !== 202 && res.statusCode !== 200 && this.firstRejection === undefined) this.firstRejection = `${res.statusCode} ${body.slice(0, 300)}`
          if (res.statusCode === 202 || res.statusCode === 200) {
            this.accepted++
            if (track) this.ackedAt.set(signalId, performance.now())
          } else {
            this.rejected++
            this.rejections[res.statusCode ?? 0] = (this.rejections[res.statusCode ?? 0] ?? 0) + 1
          }
          resolve(res.statusCode ?? 0)
        })
      })
      req.on('error', () => {
        this.rejected++
        resolve(0)
      })
      if (track) this.sentAt.set(signalId, performance.now())
      req.end(signed.body)
    })
  }

  /** `total` signals round-robin over `sources`, at most `concurrency` in flight, as fast as they are answered. */
  async pushMany(sources: readonly BenchSource[], total: number, concurrency = 32): Promise<void> {
    let next = 0
    const lane = async () => {
      while (next < total) await this.push(sources[next++ % sources.length]!, false)
    }
    await Promise.all(Array.from({ length: concurrency }, lane))
  }

  /** `rate` signals/s for `seconds`, in 10 ms ticks, round-robin over `sources`. */
  async pushAtRate(sources: readonly BenchSource[], rate: number, seconds: number): Promise<void> {
    const tickMs = 10
    const t0 = performance.now()
    const total = rate * seconds
    const pending: Promise<number>[] = []
    let sent = 0
    while (sent < total) {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate) + 1)
      while (sent < due) pending.push(this.push(sources[sent++ % sources.length]!))
      await new Promise((r) => setTimeout(r, tickMs))
    }
    await Promise.all(pending)
  }

  close(): void {
    this.#agent.destroy()
  }
}
