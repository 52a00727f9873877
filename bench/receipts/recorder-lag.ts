import { setTimeout as sleep } from 'node:timers/promises'
import { Agent, request } from 'undici'
import { percentile } from './stats.js'

/**
 * The recorder's lag as the gateway reports it on `GET /readyz` (`recorder.lag_records`,
 * `recorder.lag_seconds`: the age of the oldest signal not yet recorded, to 0.1 s), read
 * every 100 ms. The same figure is `sgw_recorder_lag_seconds` on /metrics; /readyz needs
 * no token and renders nothing else, so polling it costs the gateway least.
 */

const PERIOD_MS = 100
const agent = new Agent({ connections: 1, keepAliveTimeout: 60_000 })

export interface LagSample {
  /** ms since the sampler started. */
  readonly at_ms: number
  readonly lag_s: number
  readonly lag_records: number
  readonly state: string
}

export async function readLag(url: string): Promise<Omit<LagSample, 'at_ms'>> {
  const res = await request(`${url}/readyz`, { dispatcher: agent })
  const body = (await res.body.json()) as { data?: { recorder?: { lag_seconds: number; lag_records: number; state: string } } }
  const r = body.data?.recorder
  if (r === undefined) throw new Error(`/readyz ${res.statusCode} without the recorder's status: ${JSON.stringify(body)}`)
  return { lag_s: r.lag_seconds, lag_records: r.lag_records, state: r.state }
}

export class LagSampler {
  readonly samples: LagSample[] = []
  readonly #url: string
  readonly #t0 = performance.now()
  #running = true
  readonly #loop: Promise<void>

  constructor(url: string) {
    this.#url = url
    this.#loop = this.#run()
  }

  /** ms since the sampler started. */
  now(): number {
    return performance.now() - this.#t0
  }

  async #run(): Promise<void> {
    while (this.#running) {
      const t = performance.now()
      const lag = await readLag(this.#url)
      this.samples.push({ at_ms: Math.round(t - this.#t0), ...lag })
      await sleep(Math.max(0, PERIOD_MS - (performance.now() - t)))
    }
  }

  /** Resolves at the first sample with nothing left to record after `afterMs`, or undefined past `timeoutMs`. */
  async caughtUp(afterMs: number, timeoutMs: number): Promise<number | undefined> {
    const deadline = performance.now() + timeoutMs
    while (performance.now() < deadline) {
      const done = this.samples.find((s) => s.at_ms >= afterMs && s.lag_records === 0)
      if (done !== undefined) return done.at_ms
      await sleep(PERIOD_MS)
    }
    return undefined
  }

  async stop(): Promise<void> {
    this.#running = false
    await this.#loop
  }
}

export interface LagFigures {
  readonly samples: number
  readonly p50_s: number
  readonly p99_s: number
  readonly max_s: number
  readonly max_records: number
}

/** Lag figures of the samples taken between `fromMs` and `toMs`. */
export function lagFigures(samples: readonly LagSample[], fromMs: number, toMs: number): LagFigures {
  const inside = samples.filter((s) => s.at_ms >= fromMs && s.at_ms <= toMs)
  const lags = inside.map((s) => s.lag_s)
  return {
    samples: inside.length,
    p50_s: percentile(lags, 50),
    p99_s: percentile(lags, 99),
    max_s: Math.max(0, ...lags),
    max_records: Math.max(0, ...inside.map((s) => s.lag_records)),
  }
}

export async function closeLagAgent(): Promise<void> {
  await agent.close()
}
