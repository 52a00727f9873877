import { api, withQuery } from './api-client.js'
import { el, errorNote, panel, table, when } from './dom.js'
import { signalsChart, type StatsBucket } from './signals-chart.js'
import type { ViewScope } from './view-scope.js'

interface Source {
  source_id: string
  agent_id: string
  state: string
  created_at: string
  flagged_for_review?: boolean
}
interface Key {
  key_id: string
  state: string
  created_at: string
  promoted_at: string | null
  revoked_at: string | null
}
interface Receipt {
  receipt_id: string
  severity: string
  token: string
  confidence: number | null
  emitted_at: string
  outcome: string
  test?: boolean
}
interface IngestError {
  request_id: string
  time: string
  status: number
  code: string
  key_id: string | null
}

const enc = encodeURIComponent

/**
 * A creator's view: its sources; for the chosen one its keys and their states, the
 * signals per minute by severity, a live feed of its newest receipts (test ones marked)
 * and its refused pushes. The feed, chart and errors refresh every few seconds.
 */
export function creatorView(root: HTMLElement, scope: ViewScope): void {
  const sources = panel('sources', 'Sources')
  const keys = panel('keys', 'Keys')
  const chart = panel('chart', 'Signals per minute by severity (last hour)')
  const feed = panel('feed', 'Live feed: newest receipts')
  const errors = panel('ingest-errors', 'Ingest errors')
  const picker = el('select', { id: 'source-picker', 'aria-label': 'source' })
  root.replaceChildren(sources.root, el('div', { class: 'row' }, el('label', {}, 'Source ', picker)), keys.root, chart.root, feed.root, errors.root)

  let chosen: string | undefined
  const showSource = async () => {
    if (chosen === undefined) return
    const id = enc(chosen)
    await Promise.all([
      api<Key[]>('GET', `/v1/byo/sources/${id}/keys`).then(
        (r) => keys.show(table('keys-table', [['key', (k) => k.key_id], ['state', (k) => el('span', { class: `state state-${k.state}` }, k.state)], ['created', (k) => when(k.created_at)], ['promoted', (k) => when(k.promoted_at)], ['revoked', (k) => when(k.revoked_at)]], r.data, 'No keys.')),
        (err) => keys.show(errorNote(err)),
      ),
      api<{ buckets: StatsBucket[]; totals: { total: number } }>('GET', `/v1/byo/sources/${id}/stats?bucket=minute`).then(
        (r) => chart.show(el('p', { id: 'stats-total' }, `${r.data.totals.total} signals in the last hour`), signalsChart(r.data.buckets, Math.max(320, chart.body.clientWidth || 640))),
        (err) => chart.show(errorNote(err)),
      ),
      api<Receipt[]>('GET', withQuery(`/v1/byo/sources/${id}/receipts`, { limit: 20, include_test: 'true' })).then(
        (r) => feed.show(table('feed-table', [['emitted', (x) => when(x.emitted_at)], ['severity', (x) => x.severity], ['token', (x) => x.token], ['confidence', (x) => x.confidence ?? '—'], ['outcome', (x) => x.outcome], ['', (x) => (x.test ? 'test' : '')]], r.data, 'No receipts yet.')),
        (err) => feed.show(errorNote(err)),
      ),
      api<IngestError[]>('GET', withQuery(`/v1/byo/sources/${id}/ingest-errors`, { limit: 20 })).then(
        (r) => errors.show(table('ingest-errors-table', [['time', (e) => when(e.time)], ['status', (e) => e.status], ['code', (e) => e.code], ['key', (e) => e.key_id ?? '—'], ['request', (e) => e.request_id]], r.data, 'No refused pushes.')),
        (err) => errors.show(errorNote(err)),
      ),
    ])
  }
  picker.addEventListener('change', () => {
    chosen = picker.value
    void showSource()
  })

  void api<Source[]>('GET', withQuery('/v1/byo/sources', { limit: 200 })).then(
    (r) => {
      sources.show(table('sources-table', [['source', (s) => s.source_id], ['agent', (s) => s.agent_id], ['state', (s) => s.state], ['created', (s) => when(s.created_at)], ['flagged', (s) => (s.flagged_for_review ? 'yes' : '')]], r.data, 'No sources yet.'))
      picker.replaceChildren(...r.data.map((s) => el('option', { value: s.source_id }, s.source_id)))
      chosen = r.data[0]?.source_id
      scope.every(5000, showSource)
    },
    (err) => sources.show(errorNote(err)),
  )
}
