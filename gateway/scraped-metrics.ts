import { Counter, Gauge, type Registry } from 'prom-client'

/**
 * Metrics whose value is read from a component's own running numbers when scraped
 * (prom-client's `collect`), so nothing on a hot path calls prom-client.
 */
export function scrapedMetrics(registry: Registry) {
  const registers = [registry]
  return {
    gauge: (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect(this: Gauge) {
          this.set(read())
        },
      }),
    /** A count since the start: the component's running total, set whole at each scrape. */
    counter: (name: string, help: string, read: () => number) =>
      new Counter({
        name,
        help,
        registers,
        collect(this: Counter) {
          this.reset()
          this.inc(read())
        },
      }),
  }
}
