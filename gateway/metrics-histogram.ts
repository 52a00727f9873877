import type { Metric } from 'prom-client'

/** One line of the page: `<name>_bucket{le="0.005"} 12`, `<name>_sum 0.4`, `<name>_count 12`. */
interface Series {
  readonly metricName: string
  readonly labels: { readonly le?: number | '+Inf' }
  readonly value: number
}

/**
 * What prom-client's Registry reads from a metric. (Its typings declare `type` as a
 * numeric enum; the registry writes the string into `# TYPE`.)
 */
export interface CollectedMetric {
  readonly name: string
  readonly help: string
  readonly type: 'histogram'
  readonly aggregator: 'sum'
  readonly values: readonly Series[]
}

/**
 * A Prometheus histogram in seconds that is fed milliseconds and counts into a
 * preallocated array, for the ingest hot path: `observeMs` is a loop over the bounds and
 * three number writes, no allocation. prom-client's own `Histogram.observe` builds a
 * labels object and a hash string per call (about 200 ns and 190 bytes, see
 * bench/metrics-hot-path.ts), garbage made 16,000 times a second under load.
 *
 * It is registered in a prom-client Registry like any metric: the registry reads a
 * metric through `get()` (name, help, type and the series), which is all this implements.
 */
export class MillisecondsHistogram {
  readonly name: string
  readonly help: string
  readonly type = 'histogram' as const
  readonly aggregator = 'sum' as const
  readonly #boundsMs: readonly number[]
  /** Observations per bucket, not cumulative; the last slot is above every bound. */
  readonly #counts: Float64Array
  #sumMs = 0
  #count = 0

  /** `boundsMs`: the upper bounds in milliseconds, ascending; shown as seconds. */
  constructor(name: string, help: string, boundsMs: readonly number[]) {
    if (!name.endsWith('_seconds')) throw new Error(`${name}: a duration histogram is named in seconds`)
    for (let i = 1; i < boundsMs.length; i++) if ((boundsMs[i] as number) <= (boundsMs[i - 1] as number)) throw new Error(`${name}: bounds must ascend`)
    this.name = name
    this.help = help
    this.#boundsMs = boundsMs
    this.#counts = new Float64Array(boundsMs.length + 1)
  }

  observeMs(ms: number): void {
    const bounds = this.#boundsMs
    let i = 0
    while (i < bounds.length && ms > (bounds[i] as number)) i++
    this.#counts[i] = (this.#counts[i] as number) + 1
    this.#sumMs += ms
    this.#count++
  }

  get(): Promise<CollectedMetric> {
    const values: Series[] = []
    let cumulative = 0
    this.#boundsMs.forEach((boundMs, i) => {
      cumulative += this.#counts[i] as number
      values.push({ metricName: `${this.name}_bucket`, labels: { le: boundMs / 1000 }, value: cumulative })
    })
    values.push(
      { metricName: `${this.name}_bucket`, labels: { le: '+Inf' }, value: this.#count },
      { metricName: `${this.name}_sum`, labels: {}, value: this.#sumMs / 1000 },
      { metricName: `${this.name}_count`, labels: {}, value: this.#count },
    )
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values })
  }

  /** Registry.resetMetrics() calls it on every metric. */
  reset(): void {
    this.#counts.fill(0)
    this.#sumMs = 0
    this.#count = 0
  }

  /** The registry's typings list prom-client's own classes only; its code asks no more than `get()`. */
  asMetric(): Metric {
    return this as unknown as Metric
  }
}
