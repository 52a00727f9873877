import { api, apiText } from './api-client.js'
import { el, errorNote, panel, table } from './dom.js'
import { samplesOf } from './metrics-text.js'
import type { ViewScope } from './view-scope.js'

interface Readiness {
  status: string
  role: string
  verify_queue?: number
  recorder?: { state: string; lag_records: number; lag_seconds: number; disputes_pending?: number; last_error?: string }
  delivery?: { open_streams: number }
}

const sum = (list: { value: number }[] | undefined) => (list ?? []).reduce((n, s) => n + s.value, 0)

/**
 * An operator's view (the admin or a metrics token): readiness, the recorder's lag, and
 * delivery's health from the metrics (webhook attempts by result, dead letters, stream
 * disconnects by reason). Refreshed every few seconds.
 */
export function operatorView(root: HTMLElement, scope: ViewScope): void {
  const ready = panel('readiness', 'Readiness')
  const recorder = panel('recorder', 'Recorder')
  const delivery = panel('delivery-health', 'Delivery health')
  root.replaceChildren(ready.root, recorder.root, delivery.root)
  const row = (k: string, v: unknown) => el('tr', {}, el('th', {}, k), el('td', {}, String(v ?? '—')))

  scope.every(5000, async () => {
    let readiness: Readiness | undefined
    try {
      readiness = (await api<Readiness>('GET', '/readyz')).data
      ready.show(el('table', { id: 'readiness-table' }, row('status', readiness.status), row('role', readiness.role), row('verify queue', readiness.verify_queue), row('open streams', readiness.delivery?.open_streams)))
    } catch (err) {
      ready.show(errorNote(err))
    }
    const r = readiness?.recorder
    recorder.show(r === undefined ? el('p', { class: 'empty' }, 'No recorder runs in this process.') : el('table', { id: 'recorder-table' }, row('state', r.state), row('lag (records)', r.lag_records), row('lag (seconds)', r.lag_seconds), row('disputes pending', r.disputes_pending), row('last error', r.last_error)))
    try {
      const samples = samplesOf(await apiText('/metrics'))
      const attempts = samples.get('sgw_webhook_attempts_total') ?? []
      const disconnects = samples.get('sgw_stream_disconnects_total') ?? []
      delivery.show(
        el('table', { id: 'delivery-table' }, row('webhook attempts', sum(attempts)), row('webhook dead letters', sum(samples.get('sgw_webhook_dead_letters_total'))), row('signals accepted', sum(samples.get('sgw_ingest_accepted_total'))), row('pushes refused', sum(samples.get('sgw_ingest_refused_total')))),
        el('h3', {}, 'Webhook attempts by result'),
        table('attempts-by-result', [['result', (s) => s.labels['result'] ?? ''], ['count', (s) => s.value]], attempts, 'No webhook attempts yet.'),
        el('h3', {}, 'Stream disconnects by reason'),
        table('disconnects-by-reason', [['reason', (s) => s.labels['reason'] ?? ''], ['count', (s) => s.value]], disconnects, 'No stream disconnects yet.'),
      )
    } catch (err) {
      delivery.show(errorNote(err))
    }
  })
}
