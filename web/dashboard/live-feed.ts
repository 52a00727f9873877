import { api, withQuery } from './api-client.js'
import type { ViewScope } from './view-scope.js'

export interface FeedEvent {
  readonly event: string
  readonly event_id: string
  readonly [field: string]: unknown
}

const EVENT_TYPES = ['byo.signal.accepted', 'byo.signal.disputed', 'byo.rental.ended', 'byo.stream.gap']

/**
 * A rental's event stream in the browser. EventSource cannot send an Authorization header,
 * so each connection is opened with a single-use stream ticket taken with the token
 * (the token itself never goes into a URL). A ticket serves one connection: when the
 * stream drops, a new ticket is taken and the stream resumes after the last event seen.
 */
export function openLiveFeed(rentalId: string, scope: ViewScope, onEvent: (e: FeedEvent) => void, onState: (state: string) => void): void {
  let lastId: string | undefined
  let source: EventSource | undefined
  let retry: ReturnType<typeof setTimeout> | undefined
  scope.onStop(() => {
    source?.close()
    clearTimeout(retry)
  })
  const connect = async () => {
    if (scope.stopped) return
    let ticket: string
    try {
      ticket = (await api<{ ticket: string }>('POST', `/v1/rentals/${encodeURIComponent(rentalId)}/stream-tickets`)).data.ticket
    } catch (err) {
      onState(`cannot open the stream: ${(err as Error).message}`)
      retry = setTimeout(connect, 5000)
      return
    }
    if (scope.stopped) return
    source = new EventSource(withQuery(`/v1/rentals/${encodeURIComponent(rentalId)}/events`, { ticket, last_event_id: lastId }))
    source.onopen = () => onState('live')
    for (const type of EVENT_TYPES) {
      source.addEventListener(type, (m) => {
        const msg = m as MessageEvent<string>
        if (msg.lastEventId !== '') lastId = msg.lastEventId
        try {
          onEvent(JSON.parse(msg.data) as FeedEvent)
        } catch {
          // A frame that is not JSON is not shown.
        }
        if (type === 'byo.rental.ended') {
          source?.close()
          onState('the rental has ended')
        }
      })
    }
    source.onerror = () => {
      // The ticket was used by this connection: a reconnect needs a new one.
      if (source?.readyState === EventSource.CLOSED || source?.readyState === EventSource.CONNECTING) {
        source.close()
        onState('reconnecting')
        retry = setTimeout(connect, 2000)
      }
    }
  }
  void connect()
}
