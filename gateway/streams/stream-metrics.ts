import type { Registry } from 'prom-client'
import type { StreamHub } from '../../delivery/index.js'
import { scrapedMetrics } from '../scraped-metrics.js'

/** The streams' figures, read at scrape time. */
export function registerStreamMetrics(registry: Registry, hub: StreamHub): void {
  const { gauge, counter } = scrapedMetrics(registry)
  gauge('sgw_streams_open', 'Rental event streams (SSE) open in this process.', () => hub.openStreams)
  counter('sgw_stream_events_sent_total', 'Events written to rental event streams since the start.', () => hub.eventsSent)
  counter('sgw_stream_slow_disconnects_total', 'Streams disconnected because their reader fell further behind than STREAM_BUFFER_BYTES.', () => hub.slowDisconnects)
}
