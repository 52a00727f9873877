import type { HttpRequest } from './uws.js'

/** The headers that say how a request body is framed, every occurrence kept. */
export interface FramingHeaders {
  contentLength: string[]
  transferEncoding: number
  contentType: string[]
}

export function collectFramingHeaders(req: HttpRequest): FramingHeaders {
  const h: FramingHeaders = { contentLength: [], transferEncoding: 0, contentType: [] }
  req.forEach((key, value) => {
    if (key === 'content-length') h.contentLength.push(value)
    else if (key === 'content-type') h.contentType.push(value)
    else if (key === 'transfer-encoding') h.transferEncoding++
  })
  return h
}

export type FramingProblem = { readonly kind: 'too_large' | 'malformed'; readonly message: string }

/**
 * Exactly one Content-Length of at most `maxBytes` and no Transfer-Encoding: two
 * lengths, or a length beside chunking, is how request smuggling starts, so callers
 * close the connection after refusing. A body, when there is one, must be JSON.
 */
export function framingProblem(h: FramingHeaders, maxBytes: number, options: { bodyRequired: boolean }): FramingProblem | undefined {
  if (h.transferEncoding > 0) return { kind: 'malformed', message: 'Transfer-Encoding is not accepted; send Content-Length' }
  if (h.contentLength.length > 1) return { kind: 'malformed', message: 'exactly one Content-Length header is required' }
  const length = h.contentLength[0]
  if (length === undefined) return options.bodyRequired ? { kind: 'malformed', message: 'Content-Length is required' } : undefined
  if (!/^\d{1,9}$/.test(length)) return { kind: 'malformed', message: 'Content-Length is not a number' }
  // By value, not by text: `00` is an empty body too.
  const bytes = Number(length)
  if (bytes === 0) return options.bodyRequired ? { kind: 'malformed', message: 'body is empty' } : undefined
  if (bytes > maxBytes) return { kind: 'too_large', message: `body is larger than ${maxBytes} bytes` }
  if (!isJsonContentType(h.contentType)) return { kind: 'malformed', message: 'Content-Type must be application/json' }
  return undefined
}

/** `application/json`, once, optionally with a UTF-8 charset; the media type is case-insensitive. */
export function isJsonContentType(values: string[]): boolean {
  if (values.length !== 1) return false
  return /^application\/json\s*(;\s*charset="?utf-8"?\s*)?$/i.test((values[0] as string).trim())
}
