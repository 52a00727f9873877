import { hash } from 'node:crypto'
import type { Logger } from 'pino'
import type { IngestPipeline, RefusalHistory, SignedRequest, VerifyPool } from '../pipeline/index.js'
import { isValidSignalId, keyOrClockRefusal, parseIsoUtc, parseStrictJson, unknownKeyRefusal } from '../pipeline/index.js'
import type { LiveKey, Registry, SourceRecord } from '../registry/index.js'
import { ApiError, ERROR_STATUS } from '../schemas/index.js'
import { tracingOn } from '../tracing/index.js'
import type { BodyReader } from './http/body-reader.js'
import type { Metrics } from './metrics.js'
import type { Reply } from './http/reply.js'
import type { RouteHandler } from './http/route.js'
import { framingProblem } from './http/framing.js'
import { endIngestSpan, startIngestSpan } from './ingest-spans.js'
import { addressKey, addressText, type ClientAddresses } from './client-address.js'
import { laneOf, type ProvenAddresses } from './proven-addresses.js'
import { collectIngestHeaders, isValidKeyId, isValidNonce, parseSignatureHeader, type IngestHeaders } from './ingest-headers.js'

/** A signal's body is at most 16 KB; a larger one is 400 invalid_body. */
export const MAX_BODY_BYTES = 16 * 1024

export interface IngestEdgeParts {
  readonly registry: Registry
  readonly pipeline: IngestPipeline
  readonly pool: VerifyPool
  readonly errors: RefusalHistory
  readonly bodies: BodyReader
  readonly logger: Logger
  readonly now: () => number
  readonly isDraining: () => boolean
  /** True until the nonce and dedup state is rebuilt from the journal. */
  readonly isStarting: () => boolean
  readonly track: (reply: Reply) => void
  readonly metrics: Metrics
  /** The client addresses that proved themselves for a key (its lane of the shared slots). */
  readonly provenAddresses: ProvenAddresses
  /** Where a request came from: the TCP peer, or the client a trusted proxy names. */
  readonly clientAddresses: ClientAddresses
}

/** What is known of a request when it is refused, for the operator's ingest-error list. */
interface RefusalContext {
  sourceKnown: boolean
  sourceId: string
  keyId: string | null
  signalId: string | null
  nonce: string | undefined
  /** Where the request came from (ClientAddresses), for a known source only. */
  client: Buffer | undefined
}

/**
 * The ingest edge: every check that costs no crypto, in the documented order (docs/api.md,
 * "Ingest: the order of checks"): shed when full → framing and Content-Type → header source id →
 * body → body source id → auth headers → key → request skew → verification slot.
 * Refusals up to the header source id are decided before the body is read.
 */
export function ingestHandler(parts: IngestEdgeParts): RouteHandler {
  const { registry, pool, logger } = parts
  const proven = parts.provenAddresses

  const refuse = (reply: Reply, ctx: RefusalContext, error: ApiError, close = false) => {
    reply.fail(error, close)
    parts.metrics.refused(error.code)
    if (error.status >= 500) {
      // Shutdown and a full nonce store are expected under load; only a fault is worth an error line.
      if (error.code === 'internal_error') logger.error({ request_id: reply.requestId, err: error.cause ?? error }, 'ingest failed')
      else logger.debug({ request_id: reply.requestId, code: error.code }, 'ingest refused for now')
    } else {
      // One line per refusal only at debug: at info, a flood of junk would become a flood of
      // log lines. Operators get a count per code each minute
      // (Metrics.refusalsSinceLastSummary); creators get the full list through ingest-errors.
      logger.debug({ request_id: reply.requestId, source_id: ctx.sourceId, code: error.code, status: error.status }, 'ingest refused')
    }
    // 5xx answers reach this list too (not_ready, a full nonce store, internal_error);
    // only `shed` below, the cheapest answer under overload, stays out of it.
    if (ctx.sourceKnown) {
      parts.errors.record(
        ctx.sourceId,
        {
          request_id: reply.requestId,
          time: new Date(parts.now()).toISOString(),
          status: error.status,
          code: error.code,
          key_id: ctx.keyId,
          signal_id: ctx.signalId,
          client_address: ctx.client === undefined ? null : addressText(ctx.client),
        },
        ctx.nonce,
      )
    }
  }

  /**
   * Sheds: under overload the refusal itself must be the cheapest path, so it is counted
   * in /metrics only, not in the ingest-error list (docs/api.md, "Ingest: the order of checks"). The
   * connection closes while draining, and for a slow upload, whose body was not read.
   */
  const shed = (reply: Reply, slowUpload = false) => {
    const draining = parts.isDraining()
    const error = draining
      ? new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 })
      : parts.isStarting()
        ? new ApiError('not_ready', 'the gateway is starting: it rebuilds its nonce and dedup state from the signal log first; retry', { retryAfter: 1 })
        : slowUpload
        ? new ApiError('overloaded', 'too many request bodies are arriving slowly; send the body with the head, or retry', { retryAfter: 1 })
        : new ApiError('overloaded', 'the gateway is at capacity (verification or the signal log); retry', { retryAfter: 1 })
    parts.metrics.refused(error.code)
    reply.fail(error, draining || slowUpload)
  }

  return (reply, req, res) => {
    const receivedAtMs = parts.now()
    parts.track(reply)
    const urlSourceId = req.getParameter(0) ?? ''
    const source = registry.source(urlSourceId)
    if (parts.isDraining() || parts.isStarting() || !pool.hasRoom() || !parts.pipeline.hasRoom()) return shed(reply)
    // A known source's verification slots are counted in two lanes, requests from the
    // addresses that proved themselves for the key named, and the rest (ProvenAddresses);
    // a lane that holds its share is shed before anything is parsed. The first key id
    // header is enough to pick a lane: a request with two is refused before verification.
    const client = source === undefined ? undefined : parts.clientAddresses.of(res, req)
    const address = client === undefined ? '' : addressKey(client)
    const fromProven = source !== undefined && proven.isProven(req.getHeader('x-svc-key-id'), address)
    const verifyHolder = source === undefined ? undefined : laneOf(urlSourceId, fromProven)
    if (verifyHolder !== undefined && !pool.hasRoom(verifyHolder)) return shed(reply)
    const path = req.getUrl()
    const headers = collectIngestHeaders(req)
    const ctx: RefusalContext = { sourceKnown: source !== undefined, sourceId: urlSourceId, keyId: null, signalId: null, nonce: undefined, client }

    // An oversized body is invalid_body too, like one that is not JSON.
    const framing = framingProblem(headers, MAX_BODY_BYTES, { bodyRequired: true })
    if (framing !== undefined) return refuse(reply, ctx, new ApiError('invalid_body', framing.kind === 'too_large' ? 'body is larger than 16 KB' : framing.message), true)

    // From here on the framing is sound: uWS skips an unread body of a declared length,
    // so a refusal keeps the connection (a reconnect per refusal costs both sides).
    const sourceHeader = checkSourceHeader(headers, urlSourceId)
    if (sourceHeader !== undefined) return refuse(reply, ctx, sourceHeader)
    // Parsed now, while uWS still holds the request; refused only after the body's
    // source_id: the three source ids (URL, header, body) are checked together, before any auth check.
    const auth = parseAuthHeaders(headers)
    // The key id is recorded with a refusal whenever it came well-formed, also when another auth header did not.
    ctx.keyId = auth instanceof ApiError ? sentKeyId(headers) : auth.keyId
    // Taken out as values, so the closures below, which live as long as the request, do not hold the header object.
    const idempotencyKey = headers.idempotencyKey[0]
    const idempotencyKeyCount = headers.idempotencyKey.length
    // A body that trickles in holds no verification slot: it waits among the slow uploads
    // (BodyReader, BODY_SLOW_MAX), so holding bodies back cannot starve other clients.
    // A key id is no secret (it travels in clear), so the places are shared out by the
    // source's creator: one creator holding bodies back takes at most its share, never
    // everyone's, and the creator's proven addresses have a share apart. A head that fails the key or skew check waits in places of its own
    // (no creator vouches for it), so that its body's source_id is still judged first, as
    // the documented order of checks has it; past those places it gets the head's refusal at once.
    const headCheck = auth instanceof ApiError ? auth : checkKeyAndSkew(registry, source, auth, receivedAtMs)
    const cancelUpload = parts.bodies.read(res, MAX_BODY_BYTES, {
      onTimeout: () => refuse(reply, ctx, new ApiError('invalid_body', 'request body was not received in time'), true),
      onTooLarge: () => refuse(reply, ctx, new ApiError('invalid_body', 'body is larger than 16 KB'), true),
      onBusy: () => (headCheck instanceof ApiError ? refuse(reply, ctx, headCheck, true) : shed(reply, true)),
      onBody: (body) => {
        const json = parseStrictJson(body)
        // A body that is not a JSON object has no source_id to compare; it fails later as invalid_body.
        const isObject = json.ok && typeof json.value === 'object' && json.value !== null && !Array.isArray(json.value)
        // The creator looks a refusal up by its signal id (a stale clock, a wrong key):
        // quoted for any refusal from here on, when the body holds a well-formed one.
        const signalId = isObject ? (json.value as Record<string, unknown>)['signal_id'] : undefined
        if (isValidSignalId(signalId)) ctx.signalId = signalId
        if (isObject && (json.value as Record<string, unknown>)['source_id'] !== urlSourceId) {
          return refuse(reply, ctx, new ApiError('invalid_source_id', 'source_id in the body must equal the source id in the URL and X-Svc-Source-Id'))
        }
        // Judged on the head, once: a revocation or a clock passing the skew while the body
        // arrives is caught by the pipeline, which checks both again after verification.
        const key = headCheck
        if (key instanceof ApiError) return refuse(reply, ctx, key)
        // The slot is spent by the pipeline's verify; a full queue means waiting would only add latency.
        if (!pool.reserve(verifyHolder as string)) return shed(reply)
        const { timestamp: timestampHeader, requestTimeMs, nonce, signature } = auth as AuthHeaders
        const signed: SignedRequest = {
          requestId: reply.requestId,
          receivedAtMs,
          method: 'POST',
          path,
          // Known here: a key was found for it.
          source: source as SourceRecord,
          verifyHolder: verifyHolder as string,
          key,
          timestampHeader,
          requestTimeMs,
          nonce,
          signature,
          idempotencyKey,
          idempotencyKeyCount,
          body,
          bodySha256: hash('sha256', body, 'hex'),
          json,
          nonceClaimed: false,
          // Started only with tracing on: off, the request costs one boolean read here.
          span: tracingOn() ? startIngestSpan(receivedAtMs, urlSourceId) : undefined,
        }
        parts.pipeline.process(signed).then(
          (accepted) => {
            // Not every 202 claimed a nonce: a retry can be answered from dedup without one.
            if (signed.nonceClaimed) proven.prove(key.record.key_id, address)
            reply.send(202, accepted)
            if (signed.span !== undefined) endIngestSpan(signed.span, 202, accepted.deduplicated === true)
            parts.metrics.accepted(parts.now() - receivedAtMs, accepted.deduplicated === true)
            logger.debug({ request_id: reply.requestId, source_id: urlSourceId, signal_id: accepted.signal_id }, 'ingest accepted')
          },
          (err: unknown) => {
            // Refused after its nonce was claimed: still signed by the key holder, fresh.
            if (signed.nonceClaimed) proven.prove(key.record.key_id, address)
            ctx.nonce = signed.nonceClaimed ? nonce : undefined
            const error = err instanceof ApiError ? err : new ApiError('internal_error', 'the signal could not be stored; retry', { cause: err })
            if (signed.span !== undefined) endIngestSpan(signed.span, ERROR_STATUS[error.code], false, error.code)
            refuse(reply, ctx, error)
          },
        )
      },
    }, headCheck instanceof ApiError ? undefined : laneOf((source as SourceRecord).creator_id, fromProven))
    // A client that leaves mid-upload frees its buffered bytes now, not at the body deadline.
    reply.onAbort = cancelUpload
  }
}

/**
 * The cheap checks of the signing key, after the three source ids: the key known for
 * the source and not revoked, the request timestamp within 300 s of its arrival.
 * Returns the key, not a new object merging it with the headers: an object spread here,
 * once per request, made V8 promote about 270 bytes a request to the old generation
 * (sampling heap profiler: 80 MB in 20 s at peak; peak RSS 60 MB higher).
 */
function checkKeyAndSkew(registry: Registry, source: SourceRecord | undefined, auth: AuthHeaders, receivedAtMs: number): LiveKey | ApiError {
  const key = source === undefined ? undefined : registry.key(source.source_id, auth.keyId)
  // An unknown source (a retired one included) and an unknown key look the same, so ids cannot be probed.
  if (source === undefined || key === undefined) return unknownKeyRefusal()
  return keyOrClockRefusal(key, auth.requestTimeMs, receivedAtMs) ?? key
}

function checkSourceHeader(h: IngestHeaders, urlSourceId: string): ApiError | undefined {
  if (h.sourceId.length !== 1) return new ApiError('missing_signature', 'X-Svc-Source-Id must appear exactly once')
  // Malformed like any other security header, before it is compared with the URL.
  if (!/^[\x21-\x7e]+$/.test(h.sourceId[0] as string)) return new ApiError('missing_signature', 'X-Svc-Source-Id is malformed')
  if (h.sourceId[0] !== urlSourceId) return new ApiError('invalid_source_id', 'X-Svc-Source-Id does not match the source_id in the URL')
  return undefined
}

interface AuthHeaders {
  readonly keyId: string
  readonly timestamp: string
  readonly requestTimeMs: number
  readonly nonce: string
  readonly signature: Buffer
}

/** The one value of a header that must appear exactly once, parsed; or the refusal. */
function single<T>(name: string, values: string[], parse: (v: string) => T | undefined): T | ApiError {
  if (values.length === 0) return new ApiError('missing_signature', `${name} is required`)
  if (values.length > 1) return new ApiError('missing_signature', `${name} must appear exactly once`)
  const parsed = parse(values[0] as string)
  return parsed === undefined ? new ApiError('missing_signature', `${name} is malformed`) : parsed
}

/** X-Svc-Key-Id when it came once and well-formed, else null. */
function sentKeyId(h: IngestHeaders): string | null {
  const [keyId] = h.keyId
  return h.keyId.length === 1 && keyId !== undefined && isValidKeyId(keyId) ? keyId : null
}

/** Every authentication header (key id, timestamp, nonce, signature) present, single and well-formed: else 401 missing_signature. */
function parseAuthHeaders(h: IngestHeaders): AuthHeaders | ApiError {
  const keyId = single('X-Svc-Key-Id', h.keyId, (v) => (isValidKeyId(v) ? v : undefined))
  if (keyId instanceof ApiError) return keyId
  const requestTimeMs = single('X-Svc-Timestamp', h.timestamp, parseIsoUtc)
  if (requestTimeMs instanceof ApiError) return requestTimeMs
  const nonce = single('X-Svc-Nonce', h.nonce, (v) => (isValidNonce(v) ? v : undefined))
  if (nonce instanceof ApiError) return nonce
  const signature = single('X-Svc-Signature', h.signature, parseSignatureHeader)
  if (signature instanceof ApiError) return signature
  return { keyId, timestamp: h.timestamp[0] as string, requestTimeMs, nonce, signature }
}
