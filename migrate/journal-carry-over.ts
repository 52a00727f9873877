import { decodeSignalRecord, isMarkerData, type IngestCarryOver, type SignalLog } from '../pipeline/index.js'

/** Records read from the journal at once (each becomes one or two writes in flight). */
const CHUNK = 512

export interface CarriedOver {
  /** Accepted signals written into the cluster's signal index (present already: not counted). */
  readonly signals: number
  /** Signals the index held already (a resumed move). */
  readonly signalsPresent: number
  /** Nonces of signals accepted within the nonce window, claimed in the cluster. */
  readonly nonces: number
}

/**
 * Brings what the journal says was accepted into the cluster's ingest state, so that the
 * move changes no answer a client gets:
 * - each signal (its signal_id, and its Idempotency-Key when another) into the signal
 *   index with its first accept's time: within DEDUP_WINDOW_S of that accept a retry
 *   gets the first 202 back (`deduplicated: true`), another body `409`, and past it the
 *   signal_id stays `reused`, as on the embedded gateway. The journal holds every signal
 *   of that reach: its retention is at least the dedup window, and the cluster forgets an
 *   id after the same retention.
 * - the nonce of each signal accepted within the nonce window, claimed anew, so a
 *   captured request replayed after the move is still `401 replayed_nonce`. The claim is
 *   held for the window from the move, longer than it had left, which refuses nothing a
 *   client could still send (its timestamp is checked against the same window).
 * Dispute placements in the journal are no signals: the registry and the receipts carry
 * the disputes.
 */
export async function carryOverJournal(log: SignalLog, carry: IngestCarryOver, nonceWindowMs: number, now = Date.now()): Promise<CarriedOver> {
  const info = await log.info()
  let signals = 0
  let signalsPresent = 0
  let nonces = 0
  if (info.lastSeq === 0) return { signals, signalsPresent, nonces }
  for (let seq = Math.max(info.firstSeq, 1); seq <= info.lastSeq; ) {
    const records = await log.read({ fromSeq: seq }, CHUNK)
    if (records.length === 0) break
    await Promise.all(
      records.map(async (record) => {
        if (isMarkerData(record.data)) return
        const r = decodeSignalRecord(record.data)
        const names = r.idempotency_key === null || r.idempotency_key === r.signal_id ? [r.signal_id] : [r.signal_id, r.idempotency_key]
        const acceptedAt = Date.parse(r.received_at)
        const signal = { bodySha256: r.body_sha256, signalId: r.signal_id, receivedAtMs: acceptedAt, test: r.test }
        if (await carry.acceptedSignal(r.source_id, names, signal, acceptedAt)) signals++
        else signalsPresent++
        if (now - acceptedAt < nonceWindowMs && (await carry.claimedNonce(r.source_id, r.key_id, r.nonce))) nonces++
      }),
    )
    seq = records[records.length - 1]!.seq + 1
  }
  return { signals, signalsPresent, nonces }
}
