import { randomBytes } from 'node:crypto'
import type { SignalLookup } from '../../pipeline/index.js'
import { LOOKUP_MAX_RECORDS, parseIsoUtc } from '../../pipeline/index.js'
import { PLACEMENT_WRITE_MS, type DisputedSignal, type SourceRecord } from '../../registry/index.js'
import { ApiError, checkOpenDispute, checkResolveDispute, type OpenDisputeRequest } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { parseQuery } from '../http/query.js'
import { ownedSource, parseBody } from './access.js'

/** What the dispute routes need of the ingest pipeline. */
export interface SignalFinder {
  /** Whether the source accepted the signal id (as far back as the signal-id history reaches). */
  hasAccepted(sourceId: string, signalId: string): Promise<boolean>
  /** The signal's log record, found by the `received_at` of its 202, reading at most `budget.records` records. */
  findAccepted(sourceId: string, signalId: string, receivedAtMs: number, budget: { records: number }): Promise<SignalLookup>
  /** Appends an accepted dispute's placement to the signal log (pipeline/dispute-placement.ts); resolves with its seq. */
  placeDispute(sourceId: string, disputeId: string, attempt: string): Promise<number>
}

/** Requests reading the log or waiting for their turn, past which a new one gets 503. */
export const LOOKUPS_WAITING_MAX = 8

/**
 * Runs the log look-ups of one dispute request at a time, each within its own budget of
 * records (LOOKUP_MAX_RECORDS), so that however many arrive the reading takes no more
 * than one request's share of a core.
 */
export class LookupTurns {
  #tail: Promise<unknown> = Promise.resolve()
  #waiting = 0

  run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#waiting >= LOOKUPS_WAITING_MAX) throw new ApiError('overloaded', 'too many disputes being checked at once; retry', { retryAfter: 1 })
    this.#waiting++
    const turn = this.#tail.then(task)
    this.#tail = turn.catch(() => undefined)
    return turn.finally(() => this.#waiting--)
  }
}

/**
 * The last step of the compromise flow (revoke the key, register and rotate to a fresh one,
 * review what was accepted, then dispute): the source's operator disputes signals a
 * leaked key emitted before its revocation; the protocol review (the admin) accepts or
 * rejects the dispute, and an accepted one moves its signals to state `disputed`.
 * Each named signal is found in the log and must have been signed by the named key, so
 * a dispute cannot reach signals of a key that did not leak.
 */
export function registerDisputeRoutes(parts: JsonRoutesParts, signals: SignalFinder): void {
  const { registry } = parts
  const turns = new LookupTurns()

  jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/disputes', { access: 'creator' }, async ({ principal, params, body }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    const input = parseBody(checkOpenDispute, body)
    // Checked again as the dispute is recorded; first here, before any reading of the log.
    registry.disputableKey(source.source_id, input.key_id)
    const found = await turns.run(() => disputedSignals(source, input, signals))
    const record = await registry.openDispute({ source, keyId: input.key_id, signals: found, evidence: input.evidence, openedBy: principal.subject })
    return { status: 201, data: record }
  })

  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/disputes', { access: 'creator' }, ({ principal, params, query }) => {
    parseQuery(query, {})
    const source = ownedSource(registry, principal, params[0] as string)
    // At most DISPUTE_LIMITS.perSource: one page.
    return { status: 200, data: registry.disputesOf(source.source_id), nextCursor: null }
  })

  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/disputes/:dispute_id', { access: 'creator' }, ({ principal, params }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    const record = registry.dispute(source.source_id, params[1] as string)
    if (record === undefined) throw new ApiError('not_found', 'no such dispute for this source')
    return { status: 200, data: record }
  })

  for (const outcome of ['accepted', 'rejected'] as const) {
    const action = outcome === 'accepted' ? 'accept' : 'reject'
    jsonRoute(parts, 'post', `/v1/byo/sources/:source_id/disputes/:dispute_id/${action}`, { access: 'admin' }, async ({ principal, params, body }) => {
      const source = ownedSource(registry, principal, params[0] as string)
      const input = parseBody(checkResolveDispute, body)
      if (outcome === 'rejected') return { status: 200, data: await registry.resolveDispute(source.source_id, params[1] as string, outcome, input.resolution ?? null) }
      const disputeId = params[1] as string
      // Decided already (a retry, or refused): answered without placing anything.
      if (registry.dispute(source.source_id, disputeId)?.state !== 'open') {
        return { status: 200, data: await registry.resolveDispute(source.source_id, disputeId, outcome, input.resolution ?? null) }
      }
      // Renters receive the dispute right after its placement record in the log, which
      // every channel of every process meets in its own reading and waits at until the
      // dispute is recorded, for at most PLACEMENT_WAIT_MS: so the write is refused once
      // PLACEMENT_WRITE_MS has passed, and a retry places the dispute anew.
      const writeBy = Date.now() + PLACEMENT_WRITE_MS
      const afterSeq = await signals.placeDispute(source.source_id, disputeId, randomBytes(8).toString('hex'))
      return { status: 200, data: await registry.resolveDispute(source.source_id, disputeId, outcome, input.resolution ?? null, afterSeq, writeBy) }
    })
  }

  // The state of one signal (accepted, or disputed once a dispute naming it was accepted), for as long as the signal-id history remembers it.
  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/signals/:signal_id', { access: 'creator' }, async ({ principal, params }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    const signalId = params[1] as string
    if (!(await signals.hasAccepted(source.source_id, signalId))) throw new ApiError('not_found', 'no such signal for this source (or accepted before what the gateway remembers)')
    const disputeId = registry.disputeOf(source.source_id, signalId) ?? null
    return { status: 200, data: { signal_id: signalId, source_id: source.source_id, state: disputeId === null ? 'accepted' : 'disputed', dispute_id: disputeId } }
  })
}

/** Each named signal as the log holds it, checked to be one the leaked key signed and not a test. */
async function disputedSignals(source: SourceRecord, input: OpenDisputeRequest, signals: SignalFinder): Promise<DisputedSignal[]> {
  const seen = new Set<string>()
  const out: DisputedSignal[] = []
  const budget = { records: LOOKUP_MAX_RECORDS }
  for (const { signal_id: signalId, received_at: receivedAt } of input.signals) {
    const refuse = (why: string) => new ApiError('unknown_signal', `signal ${signalId}: ${why}`)
    if (seen.has(signalId)) throw new ApiError('invalid_request', `signal ${signalId} is named twice`)
    seen.add(signalId)
    const receivedAtMs = parseIsoUtc(receivedAt)
    if (receivedAtMs === undefined) throw new ApiError('invalid_request', `signal ${signalId}: received_at must be an ISO 8601 UTC time, as the 202 answered`)
    const found = await signals.findAccepted(source.source_id, signalId, receivedAtMs, budget)
    if (!found.found) {
      throw refuse(found.reason === 'absent' ? 'the source accepted no such signal at that received_at' : `not found within ${LOOKUP_MAX_RECORDS} records of the log: name fewer signals, or check their received_at`)
    }
    const { record } = found
    if (Date.parse(record.received_at) !== receivedAtMs) throw refuse('the source accepted no such signal at that received_at')
    if (record.key_id !== input.key_id) throw refuse(`it was signed by key ${record.key_id}, not by ${input.key_id}`)
    if (record.test) throw refuse('it is a test signal, never delivered')
    out.push({ signal_id: signalId, received_at: record.received_at, seq: found.seq })
  }
  return out
}
