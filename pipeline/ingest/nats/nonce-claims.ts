import { DiscardPolicy, jetstream } from '@nats-io/jetstream'
import type { JetStreamClient } from '@nats-io/jetstream'
import { nanos } from '@nats-io/transport-node'
import type { NatsConnection } from '@nats-io/transport-node'
import type { NonceClaim, NonceClaimRequest, NonceClaims } from '../ports.js'
import { apiCodeOf, STATE_API_CODE, stateError } from './nats-state-errors.js'
import { checkNames, ensureStream } from './stream-setup.js'
import { subjectToken } from './subject-token.js'

export interface NatsNonceClaimsOptions {
  readonly nc: NatsConnection
  /** The stream's name; every gateway of one deployment names the same stream. */
  readonly stream: string
  /** Subjects are `<subjectPrefix>.<token>`. */
  readonly subjectPrefix: string
  /** How long a claimed nonce is held: the stream's max_age. */
  readonly windowMs: number
  /** Live nonces the stream may hold, all sources together; past it a claim is `store_full`. */
  readonly maxLiveNonces: number
  readonly replicas?: number
  readonly requestTimeoutMs?: number
}

/**
 * Nonce claims in one JetStream stream, shared by every gateway. A claim is one message
 * on the subject of its (source_id, key_id, nonce), hashed into one token, published
 * with `expect.lastSubjectSequence: 0`: the server stores it only if the subject holds
 * no message, so of any number of claims on any gateways exactly one is stored
 * (`claimed`); the others get "wrong last sequence" (`replayed`). The message is the
 * claim, with an empty body.
 *
 * Expiry: the stream's max_age is the nonce window. 2.9 has no per-message TTL, so the
 * age limit of the stream is what frees a nonce: the server removes a claim once it is
 * older than the window, a moment after it at most, never before. `max_msgs_per_subject: 1` with `discard_new_per_subject` makes a publish
 * without the expectation unable to replace a claim.
 *
 * Memory: ~190 B of server memory per live subject (nats-server 2.9.10, measured), so a
 * deployment holding N claims in the window costs ~190·N bytes on each replica (6 M
 * nonces ≈ 1.1 GB). `maxLiveNonces` (the stream's max_msgs with `discard: new`) bounds
 * it: past it the server refuses the claim, which is `store_full`. There is no
 * per-source share on the server: `source_full` is never answered.
 *
 * Pipelined: a claim is one publish and its ack, nothing else; claims from any number of
 * requests are in flight together.
 */
export class NatsNonceClaims implements NonceClaims {
  readonly #js: JetStreamClient
  readonly #o: NatsNonceClaimsOptions
  #inFlight = 0

  private constructor(js: JetStreamClient, o: NatsNonceClaimsOptions) {
    this.#js = js
    this.#o = o
  }

  static async open(o: NatsNonceClaimsOptions): Promise<NatsNonceClaims> {
    checkNames(o.stream, o.subjectPrefix)
    await ensureStream(o.nc, {
      name: o.stream,
      subjects: [`${o.subjectPrefix}.*`],
      max_age: nanos(o.windowMs),
      max_msgs: o.maxLiveNonces,
      max_msgs_per_subject: 1,
      discard: DiscardPolicy.New,
      discard_new_per_subject: true,
      num_replicas: o.replicas ?? 1,
      // A claim is decided once, on its publish: no dedup ids to remember.
      duplicate_window: nanos(Math.min(o.windowMs, 1_000)),
    })
    return new NatsNonceClaims(jetstream(o.nc, { timeout: o.requestTimeoutMs ?? 5_000 }), o)
  }

  /** Claims awaiting the server's answer (this process keeps no nonces). */
  get size(): number {
    return this.#inFlight
  }

  async claim(request: NonceClaimRequest): Promise<NonceClaim> {
    const subject = `${this.#o.subjectPrefix}.${subjectToken(request.sourceId, request.keyId, request.nonce)}`
    this.#inFlight++
    try {
      await this.#js.publish(subject, undefined, { expect: { lastSubjectSequence: 0 } })
      return 'claimed'
    } catch (err) {
      const code = apiCodeOf(err)
      if (code === STATE_API_CODE.WrongLastSequence) return 'replayed'
      if (code === STATE_API_CODE.StoreFailed) return 'store_full'
      throw stateError('a nonce claim', err)
    } finally {
      this.#inFlight--
    }
  }
}
