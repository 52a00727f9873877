import type { Page } from './creator-api.js'
import { responseText } from './response-text.js'

/** A page of 200 sources with their manifests, or 1,000 receipts, is well under this. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024

export interface ApiCallerOptions {
  /** The gateway's base URL, with its path prefix if it has one. */
  readonly gatewayUrl: string
  /** A creator's, renter's or the operator's API token. */
  readonly token: string
  readonly fetch?: typeof fetch
}

/** A control-plane success body: `data`, and `next_cursor` on lists. */
export interface ApiAnswer {
  readonly data: unknown
  readonly next_cursor?: unknown
}

/**
 * One control-plane call with a bearer token, sent once (never retried: creating a source
 * or a rental is not idempotent), its answer read up to MAX_ANSWER_BYTES. An answer outside
 * 2xx, or one that is not a JSON object, throws what `fail` makes of it, so each client
 * throws its own error class with the gateway's code.
 */
export class ApiCaller {
  readonly #base: string
  readonly #token: string
  readonly #fetch: typeof fetch
  readonly #fail: (step: string, status: number, body: unknown) => Error

  constructor(options: ApiCallerOptions, fail: (step: string, status: number, body: unknown) => Error) {
    this.#base = new URL(options.gatewayUrl).href.replace(/\/+$/, '')
    this.#token = options.token
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
    this.#fail = fail
  }

  /** The full URL of a gateway path. */
  url(path: string): string {
    return this.#base + path
  }

  async request(step: string, method: string, path: string, body?: unknown): Promise<ApiAnswer> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}` }
    if (body !== undefined) headers['content-type'] = 'application/json'
    const res = await this.#fetch(this.#base + path, { method, headers, body: body === undefined ? null : JSON.stringify(body), redirect: 'manual' })
    const text = await responseText(res, MAX_ANSWER_BYTES)
    let parsed: unknown
    try {
      parsed = text === '' ? undefined : JSON.parse(text)
    } catch {
      parsed = undefined
    }
    if (res.status < 200 || res.status > 299 || typeof parsed !== 'object' || parsed === null) throw this.#fail(step, res.status, parsed)
    return parsed as ApiAnswer
  }

  async call<T>(step: string, method: string, path: string, body?: unknown): Promise<T> {
    return (await this.request(step, method, path, body)).data as T
  }

  /** A page of a list; `query` adds filters next to `limit` and `cursor`. */
  async page<T>(step: string, path: string, page: { limit?: number; cursor?: string }, query: Record<string, string | undefined> = {}): Promise<Page<T>> {
    const q = new URLSearchParams()
    for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, v)
    if (page.limit !== undefined) q.set('limit', String(page.limit))
    if (page.cursor !== undefined) q.set('cursor', page.cursor)
    const qs = q.toString()
    const body = await this.request(step, 'GET', qs === '' ? path : `${path}?${qs}`)
    return { items: body.data as T[], nextCursor: (body.next_cursor as string | null | undefined) ?? null }
  }
}
