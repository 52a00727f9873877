import type { FramingHeaders } from './http/framing.js'
import type { HttpRequest } from './http/uws.js'

/** The headers the ingest edge reads, and how often each one appeared. */
export interface IngestHeaders extends FramingHeaders {
  sourceId: string[]
  keyId: string[]
  timestamp: string[]
  nonce: string[]
  signature: string[]
  idempotencyKey: string[]
}

type ListField = Exclude<keyof IngestHeaders, 'transferEncoding'>

/**
 * A Map, not an object literal: header names are the client's, and on an object
 * `constructor` or `toString` would find Object.prototype's members.
 */
const FIELD_OF: ReadonlyMap<string, ListField> = new Map([
  ['content-length', 'contentLength'],
  ['content-type', 'contentType'],
  ['x-svc-source-id', 'sourceId'],
  ['x-svc-key-id', 'keyId'],
  ['x-svc-timestamp', 'timestamp'],
  ['x-svc-nonce', 'nonce'],
  ['x-svc-signature', 'signature'],
  ['idempotency-key', 'idempotencyKey'],
])

/**
 * Collects every occurrence, not just the first: `getHeader` returns only one value,
 * and a repeated Content-Length or security header is exactly what a smuggling or
 * confusion attempt looks like: each required header must be present exactly once.
 */
export function collectIngestHeaders(req: HttpRequest): IngestHeaders {
  const h: IngestHeaders = {
    contentLength: [],
    transferEncoding: 0,
    contentType: [],
    sourceId: [],
    keyId: [],
    timestamp: [],
    nonce: [],
    signature: [],
    idempotencyKey: [],
  }
  req.forEach((key, value) => {
    if (key === 'transfer-encoding') h.transferEncoding++
    else {
      const field = FIELD_OF.get(key)
      if (field !== undefined) h[field].push(value)
    }
  })
  return h
}


/**
 * 64 bytes are 86 base64 characters and `==`; the last character carries 2 bits of the
 * signature and 4 bits that must be zero (A, Q, g or w). Without that, 16 spellings of
 * one signature would verify, and the header would be malleable.
 */
const SIGNATURE = /^ed25519=:([A-Za-z0-9+/]{85}[AQgw]==):$/
const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/
// Visible ASCII only: a line feed in a nonce would let one signing string be read two ways.
const NONCE = /^[\x21-\x7e]{1,128}$/

/** The 64 signature bytes from `ed25519=:<base64>:`, or undefined if malformed. */
export function parseSignatureHeader(value: string): Buffer | undefined {
  const m = SIGNATURE.exec(value)
  return m === null ? undefined : Buffer.from(m[1] as string, 'base64')
}

export const isValidKeyId = (v: string) => KEY_ID.test(v)
export const isValidNonce = (v: string) => NONCE.test(v)
