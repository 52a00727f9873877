import { api, apiFile, withQuery } from './api-client.js'
import { el, errorNote, panel, table, when } from './dom.js'
import { openLiveFeed, type FeedEvent } from './live-feed.js'
import { ViewScope } from './view-scope.js'

interface Rental {
  rental_id: string
  source_id: string
  state: string
  starts_at: string
  expires_at: string | null
}
interface Receipt {
  receipt_id: string
  signal_id?: string
  severity: string
  token: string
  confidence: number | null
  emitted_at: string
  outcome: string
}
interface Attempt {
  event_id: string
  attempt: number
  attempted_at: string
  result: string
  status: number | null
  error: string | null
}
interface Webhook {
  url: string
  state: string
  failing_since: string | null
  disabled_reason: string | null
}
interface DeadLetter {
  event_id: string
  dead_at: string
  attempts: number
  last_error: string | null
}

const enc = encodeURIComponent
const FEED_MAX = 50

/** Turns a datetime-local input's value (local time) into ISO 8601 UTC; empty stays empty. */
const isoOf = (local: string): string | undefined => (local === '' ? undefined : new Date(local).toISOString())

/**
 * A renter's view: its rentals; for the chosen one the live feed (its event stream), its
 * receipts with filters and an export, and its webhook's delivery log with a re-send of
 * each event.
 */
export function renterView(root: HTMLElement, scope: ViewScope): void {
  const rentals = panel('rentals', 'Rentals')
  const feed = panel('feed', 'Live feed')
  const receipts = panel('receipts', 'Receipts')
  const deliveries = panel('deliveries', 'Webhook delivery log')
  const picker = el('select', { id: 'rental-picker', 'aria-label': 'rental' })
  root.replaceChildren(rentals.root, el('div', { class: 'row' }, el('label', {}, 'Rental ', picker)), feed.root, receipts.root, deliveries.root)

  const severity = el('input', { id: 'filter-severity', placeholder: 'severity', size: '10' })
  const outcome = el('select', { id: 'filter-outcome' }, el('option', { value: '' }, 'any outcome'), ...['pending', 'hit', 'miss', 'void'].map((o) => el('option', { value: o }, o)))
  const from = el('input', { id: 'filter-from', type: 'datetime-local', 'aria-label': 'from' })
  const to = el('input', { id: 'filter-to', type: 'datetime-local', 'aria-label': 'to' })
  const format = el('select', { id: 'export-format', 'aria-label': 'export format' }, ...['ndjson', 'csv', 'parquet'].map((f) => el('option', { value: f }, f)))
  const apply = el('button', { id: 'apply-filters', type: 'button' }, 'Apply')
  const exportButton = el('button', { id: 'export', type: 'button' }, 'Export')
  const list = el('div', { id: 'receipts-list' })
  receipts.show(el('div', { class: 'row filters' }, severity, outcome, from, to, apply, format, exportButton), list)

  let rental: Rental | undefined
  let feedScope: ViewScope | undefined
  const events: FeedEvent[] = []
  const feedList = el('ol', { id: 'feed-list' })
  const feedState = el('p', { id: 'feed-state' }, 'connecting')
  feed.show(feedState, feedList)

  const filters = () => ({ source_id: rental?.source_id, severity: severity.value.trim(), outcome: outcome.value, from: isoOf(from.value), to: isoOf(to.value) })

  const showReceipts = async () => {
    if (rental === undefined) return
    try {
      const r = await api<Receipt[]>('GET', withQuery('/v1/byo/receipts', { ...filters(), limit: 50 }))
      list.replaceChildren(table('receipts-table', [['emitted', (x) => when(x.emitted_at)], ['severity', (x) => x.severity], ['token', (x) => x.token], ['confidence', (x) => x.confidence ?? '—'], ['outcome', (x) => x.outcome], ['receipt', (x) => x.receipt_id]], r.data, 'No receipts match.'))
    } catch (err) {
      list.replaceChildren(errorNote(err))
    }
  }

  const showDeliveries = async () => {
    if (rental === undefined) return
    const id = enc(rental.rental_id)
    try {
      const hook = await api<Webhook>('GET', `/v1/rentals/${id}/webhook`)
      const r = await api<{ attempts: Attempt[]; dead_letters: DeadLetter[] }>('GET', `/v1/rentals/${id}/webhook/deliveries`)
      const resend = (eventId: string) => {
        const b = el('button', { type: 'button', class: 'resend', 'data-event': eventId }, 'Re-send')
        b.addEventListener('click', () => {
          b.disabled = true
          api('POST', `/v1/rentals/${id}/webhook/deliveries/${enc(eventId)}/resend`).then(
            () => (b.textContent = 'queued'),
            (err) => b.replaceWith(errorNote(err)),
          )
        })
        return b
      }
      deliveries.show(
        el('p', { id: 'webhook-endpoint' }, `${hook.data.url}: ${hook.data.state}`, hook.data.failing_since ? `, failing since ${when(hook.data.failing_since)}` : '', hook.data.disabled_reason ? ` (${hook.data.disabled_reason})` : ''),
        el('h3', {}, 'Attempts'),
        table('attempts-table', [['event', (a) => a.event_id], ['attempt', (a) => a.attempt], ['when', (a) => when(a.attempted_at)], ['result', (a) => a.result], ['status', (a) => a.status ?? '—'], ['error', (a) => a.error ?? ''], ['', (a) => resend(a.event_id)]], r.data.attempts, 'No attempts yet.'),
        el('h3', {}, 'Dead letters'),
        table('dead-letters-table', [['event', (d) => d.event_id], ['given up', (d) => when(d.dead_at)], ['attempts', (d) => d.attempts], ['last error', (d) => d.last_error ?? ''], ['', (d) => resend(d.event_id)]], r.data.dead_letters, 'No dead letters.'),
      )
    } catch (err) {
      // The endpoint's 404: none is set (the rental's own 404 would have failed the rental list first).
      const e = err as { status?: number }
      deliveries.show(e.status === 404 ? el('p', { id: 'no-webhook', class: 'empty' }, 'No webhook is set for this rental.') : errorNote(err))
    }
  }

  const choose = (r: Rental | undefined) => {
    rental = r
    feedScope?.stop()
    events.length = 0
    feedList.replaceChildren()
    if (r === undefined) return
    const own = new ViewScope()
    feedScope = own
    scope.onStop(() => own.stop())
    openLiveFeed(
      r.rental_id,
      own,
      (e) => {
        events.unshift(e)
        events.length = Math.min(events.length, FEED_MAX)
        feedList.replaceChildren(...events.map((x) => el('li', { class: 'feed-event', 'data-event-id': x.event_id }, `${x.event}  ${String(x['severity'] ?? '')}  ${String(x['token'] ?? '')}  ${x['emitted_at'] === undefined ? '' : when(String(x['emitted_at']))}`)))
      },
      (state) => (feedState.textContent = state),
    )
    void showReceipts()
    void showDeliveries()
  }

  apply.addEventListener('click', () => void showReceipts())
  exportButton.addEventListener('click', () => {
    exportButton.disabled = true
    // Read with the token in a header, then handed to the browser as a file: the export's
    // URL never carries the token, and no link to it is left behind.
    apiFile(withQuery('/v1/byo/receipts/export', { ...filters(), format: format.value }))
      .then(({ blob, name }) => {
        const url = URL.createObjectURL(blob)
        const a = el('a', { href: url, download: name ?? `receipts.${format.value}` })
        document.body.append(a)
        a.click()
        a.remove()
        setTimeout(() => URL.revokeObjectURL(url), 10_000)
      })
      .catch((err) => list.prepend(errorNote(err)))
      .finally(() => (exportButton.disabled = false))
  })
  picker.addEventListener('change', () => void api<Rental>('GET', `/v1/rentals/${enc(picker.value)}`).then((r) => choose(r.data), (err) => rentals.show(errorNote(err))))

  void api<Rental[]>('GET', withQuery('/v1/rentals', { limit: 200 })).then(
    (r) => {
      rentals.show(table('rentals-table', [['rental', (x) => x.rental_id], ['source', (x) => x.source_id], ['state', (x) => x.state], ['starts', (x) => when(x.starts_at)], ['expires', (x) => when(x.expires_at)]], r.data, 'No rentals.'))
      const active = r.data.filter((x) => x.state === 'active')
      picker.replaceChildren(...(active.length > 0 ? active : r.data).map((x) => el('option', { value: x.rental_id }, `${x.rental_id} (${x.source_id})`)))
      choose(active[0] ?? r.data[0])
      scope.every(10_000, showDeliveries)
    },
    (err) => rentals.show(errorNote(err)),
  )
}
