import type { DisputeRecord, KeyRecord, SourceRecord } from '../../registry/index.js'
import type { SourceStats } from '../../receipts/index.js'

const HOUR_MS = 3_600_000
/** The uptime looks back this many whole hours (30 days). */
export const UPTIME_WINDOW_HOURS = 720
/** Incidents shown, newest first; `incidents_total` counts them all. */
export const INCIDENTS_SHOWN_MAX = 50

/**
 * The whole UTC clock hours the uptime is measured over: from the hour the source was
 * created in (or 30 days back, whichever is later) to the start of the current hour. The
 * hour under way is left out, so a source is not marked down for an hour that has not ended.
 */
export function uptimeSpan(createdAt: string, nowMs: number): { fromMs: number; toMs: number } {
  const toMs = Math.floor(nowMs / HOUR_MS) * HOUR_MS
  const createdHour = Math.floor(Date.parse(createdAt) / HOUR_MS) * HOUR_MS
  return { fromMs: Math.min(toMs, Math.max(createdHour, toMs - UPTIME_WINDOW_HOURS * HOUR_MS)), toMs }
}

export type IncidentType = 'over_rate_flag' | 'key_compromised' | 'dispute_opened' | 'dispute_accepted' | 'dispute_rejected'

export interface Incident {
  readonly type: IncidentType
  readonly at: string
  readonly key_id?: string
  readonly dispute_id?: string
  /** Signals a dispute names. */
  readonly signals?: number
}

/**
 * What the gateway itself saw go wrong with a source: its flag for sustained over-rate,
 * each key revoked as compromised, and each dispute opened and resolved. Nothing a
 * creator wrote (evidence, resolution notes) is shown, only the facts and their times.
 */
export function incidentsOf(source: SourceRecord, keys: readonly KeyRecord[], disputes: readonly DisputeRecord[]): Incident[] {
  const out: Incident[] = []
  if (source.flagged_for_review_at !== null) out.push({ type: 'over_rate_flag', at: source.flagged_for_review_at })
  for (const k of keys) {
    if (k.revoked_at !== null && k.revocation_reason === 'compromise') out.push({ type: 'key_compromised', at: k.revoked_at, key_id: k.key_id })
  }
  for (const d of disputes) {
    const about = { dispute_id: d.dispute_id, key_id: d.key_id, signals: d.signals.length }
    out.push({ type: 'dispute_opened', at: d.created_at, ...about })
    if (d.state !== 'open' && d.resolved_at !== null) out.push({ type: d.state === 'accepted' ? 'dispute_accepted' : 'dispute_rejected', at: d.resolved_at, ...about })
  }
  // Newest first; of two at one instant, the later step (a resolution after its opening) first.
  const step: Record<IncidentType, number> = { over_rate_flag: 0, key_compromised: 1, dispute_opened: 2, dispute_accepted: 3, dispute_rejected: 3 }
  return out.sort((a, b) => Date.parse(b.at) - Date.parse(a.at) || step[b.type] - step[a.type])
}

/** A key as the public sees it: its life, never its public key. */
function keyView(k: KeyRecord) {
  return { key_id: k.key_id, state: k.state, created_at: k.created_at, promoted_at: k.promoted_at, grace_at: k.grace_at, revoked_at: k.revoked_at, revocation_reason: k.revocation_reason }
}

/** The status document: registry facts, the receipts' figures, and the measures made of both. */
export function sourceStatusView(source: SourceRecord, keys: readonly KeyRecord[], disputes: readonly DisputeRecord[], stats: SourceStats, span: { fromMs: number; toMs: number }) {
  const incidents = incidentsOf(source, keys, disputes)
  const hoursObserved = Math.round((span.toMs - span.fromMs) / HOUR_MS)
  const { outcomes } = stats
  return {
    source_id: source.source_id,
    agent_id: source.agent_id,
    state: source.retired_at === null ? 'live' : 'retired',
    created_at: source.created_at,
    retired_at: source.retired_at,
    manifest: {
      archetype: source.manifest.archetype,
      schema_version: source.manifest.schema_version,
      severity_levels: source.manifest.severity_levels,
      max_rate: source.manifest.max_rate,
      chains: source.manifest.coverage.chains,
    },
    listing: { public_receipts: source.listing.public_receipts },
    keys: keys.map(keyView),
    last_signal_at: stats.lastReceivedMs === null ? null : new Date(stats.lastReceivedMs).toISOString(),
    outcomes: { ...outcomes, total: outcomes.pending + outcomes.hit + outcomes.miss + outcomes.void },
    flagged_for_review: source.flagged_for_review_at !== null,
    flagged_for_review_at: source.flagged_for_review_at,
    uptime: {
      from: new Date(span.fromMs).toISOString(),
      to: new Date(span.toMs).toISOString(),
      hours: hoursObserved,
      hours_with_signals: stats.hoursWithSignals,
      ratio: hoursObserved === 0 ? null : Math.min(1, stats.hoursWithSignals / hoursObserved),
    },
    incidents: incidents.slice(0, INCIDENTS_SHOWN_MAX),
    incidents_total: incidents.length,
  }
}
