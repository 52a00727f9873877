import { isRetryableStatus, nextDelayMs, retryAfterMs } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT } from './exit-codes.js'
import { tokenOf, type Settings } from './settings.js'

/** Attempts of one control-plane call, the first included. */
const ATTEMPTS = 4
const RETRY = { deadlineMs: 60_000, attemptTimeoutMs: 10_000, baseDelayMs: 250, factor: 2, maxDelayMs: 5_000 }
/** A Retry-After longer than this is not waited out: the command ends with 3 and says when to come back. */
const MAX_WAIT_MS = 30_000

export interface CallOptions {
  readonly body?: unknown
  /**
   * Whether sending the request twice does what sending it once does (reads, PUT, DELETE,
   * promote, revoke, end, retire): only such a call is sent again after no answer or a
   * 5xx, where the first may have been done. Any call is sent again after a 429 or a 503,
   * which the gateway answers before doing anything.
   */
  readonly idempotent?: boolean
  /** Send no Authorization header (public endpoints). */
  readonly anonymous?: boolean
  /** The answer is text (a signed note, a key): `data` is the body as it came. */
  readonly text?: boolean
}

export interface CallAnswer {
  readonly status: number
  readonly data: any
  readonly next_cursor?: string | null
}

/**
 * One control-plane call with the command's token and retries. A 2xx resolves; a 4xx other
 * than 429 is the service refusing (exit 1, its code and message and request id); no answer,
 * a 5xx or a 429 still failing after the retries is exit 3.
 */
export async function gatewayCall(s: Settings, method: string, path: string, options: CallOptions = {}): Promise<CallAnswer> {
  const idempotent = options.idempotent ?? (method === 'GET' || method === 'PUT' || method === 'DELETE')
  const headers: Record<string, string> = {}
  if (options.anonymous !== true) headers['authorization'] = `Bearer ${tokenOf(s)}`
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  const url = s.url.replace(/\/+$/, '') + path
  let last = ''
  for (let attempt = 1; ; attempt++) {
    let status: number | undefined
    let retryAfter: string | null = null
    try {
      const res = await fetch(url, { method, headers, body: options.body === undefined ? null : JSON.stringify(options.body), redirect: 'manual', signal: AbortSignal.timeout(RETRY.attemptTimeoutMs) })
      status = res.status
      retryAfter = res.headers.get('retry-after')
      const text = await res.text()
      const parsed = parseJson(text)
      if (status >= 200 && status <= 299) return options.text === true ? { status, data: text } : { status, data: parsed?.data ?? parsed, next_cursor: parsed?.next_cursor }
      last = describe(status, parsed)
      if (!isRetryableStatus(status)) throw new CliError(EXIT.refused, `${method} ${path}: ${last}`, { apiCode: parsed?.error?.code })
      if (!idempotent && status !== 429 && status !== 503) throw new CliError(EXIT.unreachable, `${method} ${path}: ${last} (not sent again: it may have been done; look before retrying)`)
    } catch (err) {
      if (err instanceof CliError) throw err
      last = `no answer from ${s.url}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`
      if (!idempotent) throw new CliError(EXIT.unreachable, `${method} ${path}: ${last} (not sent again: it may have been done; look before retrying)`)
    }
    const wait = nextDelayMs({ status, retryAfter }, attempt - 1, RETRY, Date.now())
    if (attempt >= ATTEMPTS || wait > MAX_WAIT_MS) {
      const after = retryAfterMs(retryAfter, Date.now())
      throw new CliError(EXIT.unreachable, `${method} ${path}: still failing after ${attempt} attempt${attempt === 1 ? '' : 's'}; last: ${last}${after === undefined ? '' : ` (retry after ${Math.ceil(after / 1000)} s)`}`)
    }
    await new Promise((resolve) => setTimeout(resolve, wait))
  }
}

function parseJson(text: string): any {
  try {
    return text === '' ? undefined : JSON.parse(text)
  } catch {
    return undefined
  }
}

/** `404 not_found: no such source (request req_…)`, from the gateway's error body. */
export function describe(status: number, body: any): string {
  const e = body?.error
  if (typeof e !== 'object' || e === null) return `${status}`
  return `${status} ${e.code}: ${e.message}${e.request_id === undefined ? '' : ` (request ${e.request_id})`}`
}

export const enc = encodeURIComponent

/** A query string of the options given, `?a=1&b=2`, or '' when none is. */
export function queryOf(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v))
  const s = q.toString()
  return s === '' ? '' : `?${s}`
}
