import { Counter, type Registry } from 'prom-client'
import type { StreamHub } from '../../delivery/index.js'
import { scrapedMetrics } from '../scraped-metrics.js'

/** The streams' figures, read at scrape time. */
export function registerStreamMetrics(registry: Registry, hub: StreamHub): void {
  const { gauge, counter } = scrapedMetrics(registry)
  gauge('sgw_streams_open', 'Rental event streams (SSE) open in this process.', () => hub.openStreams)
  counter('sgw_stream_events_sent_total', 'Events written to rental event streams since the start.', () => hub.eventsSent)
  new Counter({
    name: 'sgw_stream_disconnects_total',
    help: 'Streams the server closed, by reason: slow_reader, stalled_reader, token_revoked, rental_ended, shutdown, error, place_lost (a client leaving is not counted).',
    labelNames: ['reason'],
    registers: [registry],
    collect(this: Counter<'reason'>) {
      this.reset()
      for (const [reason, count] of hub.disconnects) this.inc({ reason }, count)
    },
  })
}
