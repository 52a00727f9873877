import type { Logger } from 'pino'
import { parseStrictJson } from '../../pipeline/index.js'
import { isOutOfDescriptors } from '../../storage/index.js'
import type { Principal, Registry } from '../../registry/index.js'
import { ApiError } from '../../schemas/index.js'
import { requestPrincipal } from './bearer.js'
import type { BodyReader } from './body-reader.js'
import { collectFramingHeaders, framingProblem } from './framing.js'
import type { Reply } from './reply.js'
import { route, type RouteHandler } from './route.js'
import type { HttpRequest, HttpResponse, TemplatedApp } from './uws.js'

/** Control-plane bodies are small documents; a manifest is the largest. */
export const MAX_CONTROL_BODY_BYTES = 64 * 1024
/**
 * Control-plane body bytes buffered at once, all connections together (64 bodies of
 * the largest size), so uploads from many connections cannot grow memory with the
 * connection count. (Ingest bodies are bounded by their own body reader's slow-upload
 * limit and the 16 KB cap.)
 */
export const MAX_CONTROL_BODY_BYTES_IN_FLIGHT = 4 * 1024 * 1024
/** Control-plane bodies arriving slowly at once: as many as the byte budget holds at full size. */
export const MAX_CONTROL_SLOW_UPLOADS = MAX_CONTROL_BODY_BYTES_IN_FLIGHT / MAX_CONTROL_BODY_BYTES

export interface RouteContext {
  readonly requestId: string
  readonly principal: Principal
  readonly params: readonly string[]
  readonly query: URLSearchParams
  /** The parsed JSON body; undefined when the request had none. */
  readonly body: unknown
}

/** `{"ok": true, "data": ...}`; lists add `next_cursor`. */
export interface RouteResult {
  readonly status: 200 | 201
  readonly data: unknown
  readonly nextCursor?: string | null
}

export interface RouteOptions {
  /**
   * `admin`: only the admin token; `creator`: a creator token or the admin token, and
   * the handler checks ownership; `any`: any valid token, the handler checks the role
   * and what it may see. Checked before any body is read. On `admin` and `creator`
   * each role is let in by name, so a role added later is refused until a route names it.
   * `scorer`: a scorer token or the admin token. `renter`: a renter token only (what a
   * renter sets on its own rental; the handler checks it is that rental's renter).
   */
  readonly access: 'admin' | 'creator' | 'any' | 'scorer' | 'renter'
  /** The largest body this route takes; MAX_CONTROL_BODY_BYTES when absent. Counted in MAX_CONTROL_BODY_BYTES_IN_FLIGHT like any. */
  readonly maxBodyBytes?: number
}

export interface JsonRoutesParts {
  readonly app: TemplatedApp
  readonly registry: Registry
  readonly bodies: BodyReader
  readonly logger: Logger
  readonly isDraining: () => boolean
  readonly track: (reply: Reply) => void
  /** Control-plane body bytes being read now, bounded by MAX_CONTROL_BODY_BYTES_IN_FLIGHT. */
  readonly controlBodyBytes: { inFlight: number }
  /** Each registered pattern with its methods (ingest's too), for the 405s of `refuseOtherMethods`. */
  readonly routes: Map<string, string[]>
}

/**
 * Answers every other method on a registered path with 405 and `Allow`, instead of the
 * 404 of a path that does not exist. Registered last: uWS prefers a route's own method
 * over `any` on the same pattern.
 */
export function refuseOtherMethods(parts: JsonRoutesParts): void {
  for (const [pattern, methods] of parts.routes) {
    const allow = methods.join(', ')
    route(parts.app, 'any', pattern, parts.logger, (reply) => reply.fail(new ApiError('method_not_allowed', `use ${allow}`, { allow }), true))
  }
}

/** Records the methods `pattern` serves, for the `Allow` of its 405s. */
export function noteMethods(parts: JsonRoutesParts, pattern: string, ...methods: string[]): void {
  parts.routes.set(pattern, [...(parts.routes.get(pattern) ?? []), ...methods])
}

/**
 * Registers a GET route and its HEAD twin (RFC 9110 requires HEAD wherever GET is
 * served): the same handler, whose reply sends the headers only.
 */
export function getRoute(parts: JsonRoutesParts, pattern: string, handler: RouteHandler): void {
  noteMethods(parts, pattern, 'GET', 'HEAD')
  route(parts.app, 'get', pattern, parts.logger, handler)
  route(parts.app, 'head', pattern, parts.logger, handler)
}

const MAX_LOGGED_PATH = 256

const clip = (path: string) => (path.length <= MAX_LOGGED_PATH ? path : `${path.slice(0, MAX_LOGGED_PATH)}…`)

/**
 * Registers one control-plane route: bearer authentication, a bounded strict-JSON
 * body, the success envelope, and errors as `{ ok: false, error: { code, message,
 * request_id } }` bodies. A handler only returns data or throws an ApiError; anything
 * else thrown is logged and answered with 500.
 */
export function jsonRoute(
  parts: JsonRoutesParts,
  method: 'get' | 'post' | 'patch' | 'put' | 'del',
  pattern: string,
  options: RouteOptions,
  handler: (ctx: RouteContext) => Promise<RouteResult> | RouteResult,
): void {
  const paramCount = (pattern.match(/:/g) ?? []).length
  // uWS names DELETE `del`.
  const httpMethod = method === 'del' ? 'DELETE' : method.toUpperCase()
  // POST and PATCH carry bodies; GET (and its HEAD) does not.
  const takesBody = method !== 'get'
  const maxBody = options.maxBodyBytes ?? MAX_CONTROL_BODY_BYTES
  const handle = (reply: Reply, req: HttpRequest, res: HttpResponse) => {
    parts.track(reply)
    const params = Array.from({ length: paramCount }, (_, i) => pathParameter(req.getParameter(i) ?? ''))
    const query = new URLSearchParams(req.getQuery() ?? '')
    const principal = requestPrincipal(parts.registry, req)
    const framing = takesBody ? framingProblem(collectFramingHeaders(req), maxBody, { bodyRequired: false }) : undefined
    // Read only once the framing is sound: no Content-Length reads as '' (0), and `00` is 0 too.
    const hasBody = takesBody && Number(req.getHeader('content-length')) > 0
    // Clipped: the path is the client's, up to the whole request head (about 60 KB).
    const path = clip(req.getUrl())
    let role: string | undefined
    // One line per authenticated control-plane request: they are rare, and they change what
    // the gateway accepts. Requests with no valid token only at debug, so that anyone's junk
    // cannot become a flood of log lines.
    const logged = () =>
      parts.logger[role === undefined ? 'debug' : 'info']({ request_id: reply.requestId, method: method === 'get' && reply.head ? 'HEAD' : httpMethod, path, status: reply.status, role }, 'control request')
    const fail = (err: unknown, close = false) => {
      if (err instanceof ApiError) {
        reply.fail(err, close)
        return logged()
      }
      if (isOutOfDescriptors(err)) {
        // A file could not be opened while connections hold every descriptor: it passes.
        parts.logger.warn({ request_id: reply.requestId, err }, 'control request: no file descriptor left')
        reply.fail(new ApiError('overloaded', 'the gateway is out of file descriptors; retry', { retryAfter: 1 }), close)
        return logged()
      }
      parts.logger.error({ request_id: reply.requestId, err }, 'control request failed')
      reply.fail(new ApiError('internal_error', 'internal error; retry later'), close)
      logged()
    }
    if (parts.isDraining()) return fail(new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 }), true)

    // A refused POST or PATCH closes the connection rather than take in a body it will not
    // read; a GET (and HEAD, which then gets the GET's Content-Length) has none, and keeps it.
    const closeRefused = takesBody
    if (principal === undefined) return fail(new ApiError('unauthorized', 'a valid Authorization: Bearer <token> header is required'), closeRefused)
    role = principal.role
    if (options.access === 'admin' && principal.role !== 'admin') return fail(new ApiError('forbidden', 'this endpoint needs the admin token'), closeRefused)
    if (options.access === 'creator' && principal.role !== 'creator' && principal.role !== 'admin') return fail(new ApiError('forbidden', 'this endpoint is for creators'), closeRefused)
    if (options.access === 'scorer' && principal.role !== 'scorer' && principal.role !== 'admin') return fail(new ApiError('forbidden', 'this endpoint needs a scorer token'), closeRefused)
    if (options.access === 'renter' && principal.role !== 'renter') return fail(new ApiError('forbidden', 'this endpoint is for the renter of the rental'), closeRefused)

    const run = (body: unknown) => {
      Promise.resolve()
        .then(() => handler({ requestId: reply.requestId, principal, params, query, body }))
        .then(
          (result) => {
            reply.send(result.status, result.nextCursor === undefined ? { ok: true, data: result.data } : { ok: true, data: result.data, next_cursor: result.nextCursor })
            logged()
          },
          (err: unknown) => fail(err),
        )
    }
    if (framing !== undefined) return fail(new ApiError(framing.kind === 'too_large' ? 'payload_too_large' : 'invalid_request', framing.message), true)
    if (!hasBody) return run(undefined)
    // Framing is sound here, so Content-Length is one number within maxBody.
    const declared = Number(req.getHeader('content-length'))
    const budget = parts.controlBodyBytes
    if (budget.inFlight + declared > MAX_CONTROL_BODY_BYTES_IN_FLIGHT) {
      return fail(new ApiError('overloaded', 'too many control-plane uploads at once; retry', { retryAfter: 1 }), true)
    }
    budget.inFlight += declared
    let held = true
    const giveBack = () => {
      if (held) budget.inFlight -= declared
      held = false
    }
    // Whichever way the upload ends, its bytes go back to the budget first.
    const thenGiveBack =
      <A extends unknown[]>(handler: (...args: A) => void) =>
      (...args: A) => {
        giveBack()
        handler(...args)
      }
    const cancel = parts.bodies.read(res, maxBody, {
      onTimeout: thenGiveBack(() => fail(new ApiError('invalid_request', 'request body was not received in time'), true)),
      onTooLarge: thenGiveBack(() => fail(new ApiError('payload_too_large', `body is larger than ${maxBody} bytes`), true)),
      onBusy: thenGiveBack(() => fail(new ApiError('overloaded', 'too many request bodies are arriving slowly; retry', { retryAfter: 1 }), true)),
      onBody: thenGiveBack((raw: Buffer) => {
        // A body can take seconds to arrive: a token revoked meanwhile changes nothing more.
        if (!parts.registry.stillAuthenticated(principal)) return fail(new ApiError('unauthorized', 'the token was revoked'))
        const parsed = parseStrictJson(raw)
        if (!parsed.ok) return fail(new ApiError('invalid_request', `body is not valid JSON: ${parsed.reason}`))
        run(parsed.value)
      }),
      // Shared out by token holder: one creator holding bodies back cannot take every place.
    }, `${principal.role}:${principal.subject}`)
    reply.onAbort = () => {
      cancel()
      giveBack()
    }
  }
  if (method === 'get') return getRoute(parts, pattern, handle)
  noteMethods(parts, pattern, httpMethod)
  route(parts.app, method, pattern, parts.logger, handle)
}

/**
 * A path segment as the id it names: percent-decoded, since clients encode ids with
 * `encodeURIComponent` (`team:one` as `team%3Aone`). No id holds `%`, so a segment that
 * does not decode names nothing and is left as it came (a 404 follows).
 */
export function pathParameter(segment: string): string {
  if (!segment.includes('%')) return segment
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}
