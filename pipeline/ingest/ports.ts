import type { ErrorCode, Manifest } from '../../schemas/index.js'
import type { RateDecision } from './token-bucket.js'

export type { RateDecision }

/**
 * The ingest state every gateway process must share, as asynchronous ports: the pipeline
 * (ingest-pipeline.ts) asks them on every request and never sees how they keep their
 * state. The embedded adapters (./embedded/) keep it in this process and on local files;
 * a NATS adapter keeps it in JetStream and KV, where several gateways see one state. No
 * rule may rest on a check and a write sharing one turn of the event loop across ports:
 * each operation that decides (a claim, a reservation) is one atomic step of its adapter,
 * a create-if-absent or a write under an expected revision.
 *
 * Each port has a contract suite in test/contracts/ that every adapter passes.
 */

// ---------------------------------------------------------------------------------------
// Nonce claims
// ---------------------------------------------------------------------------------------

/**
 * `claimed`: the nonce is now held for the nonce window; `replayed`: it was held already.
 * `source_full` and `store_full`: a store with memory bounds holds the source's share, or
 * all it may: nothing was claimed (a store without such bounds never answers them).
 */
export type NonceClaim = 'claimed' | 'replayed' | 'source_full' | 'store_full'

export interface NonceClaimRequest {
  readonly sourceId: string
  readonly keyId: string
  readonly nonce: string
  /** When the claim is made (ms): the nonce is held until now plus the nonce window. */
  readonly now: number
  /** Live nonces the source may hold over all its keys, for a store that bounds them per source. */
  readonly sourceCap: number
}

/**
 * Nonces seen per (source_id, key_id), each held for the nonce window (10 minutes) after
 * its claim. A claim is a create-if-absent with expiry: of any number of claims of one
 * nonce under one key, on any gateway, exactly one is `claimed` while the nonce is held.
 * NATS: one subject (or KV key) per (source, key, nonce), created with an expected last
 * sequence of 0 on a stream whose age limit is the window.
 */
export interface NonceClaims {
  claim(request: NonceClaimRequest): Promise<NonceClaim>
  /** Nonces this process holds or caches, for its metrics. */
  readonly size: number
}

// ---------------------------------------------------------------------------------------
// Signal index
// ---------------------------------------------------------------------------------------

/** What the index keeps of an accepted signal: enough to answer a retry as the first 202 was answered. */
export interface AcceptedSignal {
  /** SHA-256 (hex) of the raw body the signal was accepted with. */
  readonly bodySha256: string
  readonly signalId: string
  /** The first accept's `received_at`, which every retry's 202 repeats. */
  readonly receivedAtMs: number
  readonly test: boolean
}

export interface SignalCheckRequest {
  readonly sourceId: string
  readonly signalId: string
  readonly idempotencyKey: string | undefined
  readonly bodySha256: string
  readonly now: number
  /**
   * Who asks, and the nonce the request claimed (undefined when it claimed none): a
   * deduplicated answer leaves that nonce spent and a newly bound Idempotency-Key bound,
   * which a backend whose claims and bindings are not durable by themselves (the embedded
   * one, whose log holds only the first signal) writes down.
   */
  readonly keyId: string
  readonly claimedNonce: string | undefined
  readonly receivedAtMs: number
}

export type SignalCheck =
  /** Never seen: the request holds the reservation, and must release it. */
  | { readonly kind: 'new'; readonly reservation: SignalReservation }
  /**
   * Accepted before with this very body (by signal_id or Idempotency-Key): answer with
   * `signal`. The request's Idempotency-Key, if it was held for no signal yet, is now
   * bound to this one, so the same key with another body is a conflict.
   */
  | { readonly kind: 'replay'; readonly signal: AcceptedSignal }
  /** The signal_id or Idempotency-Key was used with another body (or by another signal). */
  | { readonly kind: 'conflict' }
  /** The signal id was accepted before the dedup window: no body is left to compare, and it never makes a second signal. */
  | { readonly kind: 'reused' }
  /** Another request holds the reservation of one of these ids: wait for `settled`, then check again. */
  | { readonly kind: 'in_flight'; readonly settled: Promise<void> }
  /** A replay would bind its Idempotency-Key, and a bounded store has no room for it. */
  | { readonly kind: 'no_room'; readonly room: 'source_full' | 'store_full' }

/**
 * A new signal's hold on its ids, from its check until its answer: a concurrent request
 * with the same signal_id or Idempotency-Key, on any gateway, gets `in_flight`. NATS: a
 * pending entry made with create-if-absent, completed under its sequence, and freed by
 * its expiry if its gateway dies before it ends.
 */
export interface SignalReservation {
  /**
   * Room in a bounded store for the entries the signal will take, kept until `release`:
   * a signal the index could not remember is refused, never accepted unguarded.
   */
  takeRoom(now: number): Promise<'ok' | 'source_full' | 'store_full'>
  /**
   * The log holds the signal: appended now at `seq`, or found there already (`duplicate`,
   * `signal` being the log's first record). Every later check of its ids answers with it.
   */
  accepted(signal: AcceptedSignal, appended: { readonly seq: number; readonly duplicate: boolean }, now: number): Promise<void>
  /** The log refused the append after it may have stored the record: no answer was promised. */
  appendRefused(): void
  /** Ends the reservation and gives back its room; waiting requests check again. Safe to call twice. */
  release(): void
}

/**
 * The signal ids each source accepted, deduplicated by signal_id and by Idempotency-Key
 * (one namespace per source) with the SHA-256 of the raw body: within the dedup window a
 * retry with the same body gets the first 202 (its `received_at`) back, another body a
 * conflict; past the window, a signal_id seen before is `reused`, never a second signal
 * (as far back as the signal-id history reaches). NATS: one stream subject per (source,
 * id) written create-if-absent and under its last sequence, sources spread over several
 * streams so that no one server holds every id of the window, with the log's `msgID`
 * dedup as the last word on the append.
 */
export interface SignalIndex {
  check(request: SignalCheckRequest): Promise<SignalCheck>
  /** Whether the source accepted `signalId`, as far back as the history reaches. */
  hasAccepted(sourceId: string, signalId: string): Promise<boolean>
  /** Entries this process holds or caches, for its metrics. */
  readonly size: number
  /**
   * The log took a record that is not a signal (a dispute placement) at `seq`: the
   * embedded history keeps one fingerprint per log seq, so that its saved frames stay
   * contiguous; the dedup id is one no signal can have.
   */
  logged(dedupId: string, seq: number): void
}

// ---------------------------------------------------------------------------------------
// Refusal history
// ---------------------------------------------------------------------------------------

/** One refused ingest request, as the source's operator sees it in its ingest-error list. */
export interface IngestErrorRecord {
  readonly request_id: string
  readonly time: string
  readonly status: number
  readonly code: ErrorCode
  readonly key_id: string | null
  readonly signal_id: string | null
  /** The client the request came from (a trusted proxy's client: TRUSTED_PROXIES); null in records of earlier versions. */
  readonly client_address: string | null
}

export interface IngestErrorPage {
  readonly items: IngestErrorRecord[]
  readonly nextCursor: string | null
}

/**
 * The refused ingest requests of each source, newest first, that its creator lists. A
 * record is kept behind the answer, never awaited by it (diagnostics must not slow ingest
 * down or tell a prober by timing that a source exists), and read back by any gateway.
 * Refusals of requests whose signature verified are kept apart from the rest, so unsigned
 * junk naming a source never pushes the creator's own refusals out.
 */
export interface RefusalHistory {
  /** `claimedNonce`: the request's signature verified and its nonce was claimed. */
  record(sourceId: string, record: IngestErrorRecord, claimedNonce?: string): void
  /** Newest first; `cursor` is the `nextCursor` of the previous page; undefined for a cursor it never gave. */
  page(sourceId: string, limit: number, cursor: string | undefined): Promise<IngestErrorPage | undefined>
}

// ---------------------------------------------------------------------------------------
// Revocation barrier
// ---------------------------------------------------------------------------------------

/** What a revocation or a retirement changed: one key of a source, or the whole source. */
export interface RevocationScope {
  readonly sourceId: string
  readonly keyId?: string
}

/**
 * "No 202 under a key once its revocation is acknowledged, on any gateway", and none for
 * a source once its retirement is. Each request takes its last look at its key and source
 * just before its append and holds the barrier from then until it has its answer; the
 * revoker, once the revocation is durable, waits for `settled` before acknowledging it.
 * Requests that look after the revocation see it and are refused, so together no 202
 * follows.
 *
 * Across gateways, `settled` must wait for the holds of every gateway that may still see
 * the key as valid: on each live gateway, every hold under the scope taken before that
 * gateway's view of the registry showed the change. A gateway learns of a `settled` call
 * a moment after it is made (a watch), so a hold taken in that moment may be waited for
 * too; a hold taken after it is not, and a steady stream of requests never holds a
 * revocation back. NATS: the revoker writes an ask (a KV key); each gateway watches the
 * asks and, once its view has caught up and its earlier holds under the scope are
 * answered, writes its acknowledgement, which the revoker waits for from every gateway
 * whose presence key is fresh.
 */
export interface RevocationBarrier {
  /**
   * Holds the barrier for a request under `scope` until `answered` settles, fulfilled or
   * not. Call it in the same turn as the request's last look at its key and source.
   */
  hold(scope: RevocationScope, answered: Promise<unknown>): void
  /**
   * Resolves once every request that held the barrier before this call has its answer,
   * at least those whose scope meets `scope`. Holds taken after the call are not waited for.
   */
  settled(scope?: RevocationScope): Promise<void>
}

// ---------------------------------------------------------------------------------------
// Rate buckets
// ---------------------------------------------------------------------------------------

/**
 * Each source's `max_rate` as one token bucket (pipeline/ingest/token-bucket.ts) that
 * every gateway takes from: behind a balancer spreading a source's pushes over several
 * gateways, together they admit what one gateway would, never more than
 * `burst + rate × t` in any span t. The over-rate run that flags a source for review is
 * kept with the bucket, so refusals on any gateway count towards it. NATS: one KV key
 * per source, written under its revision.
 */
export interface RateBuckets {
  /** Takes one token of the source's bucket at `now` (ms), or says when one will be back. */
  take(sourceId: string, maxRate: Manifest['max_rate'], now: number): Promise<RateDecision>
  /**
   * Gives back a token taken by a request refused later for a reason of the gateway's own
   * (no room to remember it). Resolves once the bucket holds it; never rejects (a refund
   * that could not be written is a warning: the source admits one fewer for a moment).
   */
  refund(sourceId: string, maxRate: Manifest['max_rate']): Promise<void>
}

/** The ports the ingest pipeline asks on every request (the edge writes the RefusalHistory). */
export interface IngestPorts {
  readonly nonces: NonceClaims
  readonly signals: SignalIndex
  readonly revocations: RevocationBarrier
  readonly rates: RateBuckets
}
