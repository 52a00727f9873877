/**
 * A signal as written to the log: the normalised fields renters will see, plus what
 * makes the record self-proving later (the exact raw body, the signature and the
 * signed headers), so a receipt can be re-verified against the creator's key in a
 * dispute without trusting the gateway.
 */
export interface SignalRecord {
  readonly v: 1
  readonly source_id: string
  readonly signal_id: string
  readonly key_id: string
  readonly test: boolean
  readonly received_at: string
  readonly emitted_at: string
  readonly token: string
  readonly severity: string
  readonly confidence: number | null
  readonly note: string | null
  readonly idempotency_key: string | null
  readonly body_sha256: string
  readonly request_timestamp: string
  readonly nonce: string
  /** base64 of the 64-byte signature. */
  readonly signature: string
  /** The raw request body, byte-exact (it is strict UTF-8 JSON, checked before). */
  readonly body: string
}

/** The log's dedup id: JetStream's Nats-Msg-Id in the cluster deployment. */
export const signalDedupId = (sourceId: string, signalId: string) => `${sourceId}/${signalId}`

export const encodeSignalRecord = (record: SignalRecord): Uint8Array => Buffer.from(JSON.stringify(record))

export const decodeSignalRecord = (data: Uint8Array): SignalRecord =>
  JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as SignalRecord
