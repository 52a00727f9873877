import { type ErrorCode, isWithinSkew, MAX_SKEW_MS } from '../../schemas/index.js'
import { parseIsoUtc, subMillisecondNanos } from './iso-timestamp.js'
import { isValidToken } from './token-address.js'

/**
 * Field rules of the signal payload, each failure a 400 with its own code, applied
 * to a value strict-json has already parsed. Checks run in a fixed order and the
 * first failure wins, so a client always learns about the same problem first:
 * shape → unknown fields → source_id → signal_id → ts → token → severity →
 * confidence → note.
 */

export const SIGNAL_ID_PATTERN = /^[A-Za-z0-9_:-]{8,128}$/
export const NOTE_MAX_CODE_POINTS = 280
/** User input quoted in an error message is cut to this many UTF-16 units. */
const ECHO_MAX = 64

const FIELDS: ReadonlySet<string> = new Set(['signal_id', 'source_id', 'ts', 'token', 'severity', 'confidence', 'note'])

export interface SignalRules {
  /** The source id of the URL (already checked equal to the header). */
  sourceId: string
  /** The manifest's severity_levels. */
  severityLevels: readonly string[]
  /** The manifest's coverage.chains. */
  chains: readonly string[]
  /** X-Svc-Timestamp, in ms since the epoch. */
  requestTimeMs: number
  /** X-Svc-Timestamp as sent, for its digits past the millisecond. */
  requestTimestamp: string
}

export interface SignalPayload {
  signal_id: string
  source_id: string
  ts: string
  token: string
  severity: string
  confidence?: number
  note?: string
}

export type FieldCheck = { ok: true; signal: SignalPayload; emittedAtMs: number } | { ok: false; code: ErrorCode; message: string }

/**
 * Two client timestamps (parsed, and as sent) within the 300 s skew of each other, to
 * the nanosecond: only whole milliseconds exactly 300 s apart need the digits past them,
 * so only then are they read.
 */
function isWithinSkewExactly(aMs: number, a: string, bMs: number, b: string): boolean {
  if (!isWithinSkew(aMs, bMs)) return false
  const apart = aMs - bMs
  if (apart === MAX_SKEW_MS) return subMillisecondNanos(a) <= subMillisecondNanos(b)
  if (apart === -MAX_SKEW_MS) return subMillisecondNanos(a) >= subMillisecondNanos(b)
  return true
}

export function isValidSignalId(v: unknown): v is string {
  return typeof v === 'string' && SIGNAL_ID_PATTERN.test(v)
}

export function validateSignalFields(value: unknown, rules: SignalRules): FieldCheck {
  if (!isPlainObject(value)) return fail('invalid_body', 'body must be a JSON object')
  for (const key of Object.keys(value)) {
    if (!FIELDS.has(key)) return fail('invalid_body', `unknown field ${echo(key)}`)
  }

  const { signal_id, source_id, ts, token, severity, confidence, note } = value
  if (source_id !== rules.sourceId) {
    return fail('invalid_source_id', 'source_id must equal the source id in the URL and X-Svc-Source-Id')
  }
  if (!isValidSignalId(signal_id)) {
    return fail('invalid_signal_id', 'signal_id must be 8 to 128 characters of letters, digits, _, - and :')
  }
  const emittedAtMs = typeof ts === 'string' ? parseIsoUtc(ts) : undefined
  if (emittedAtMs === undefined) {
    return fail('invalid_timestamp', 'ts must be an ISO 8601 UTC timestamp such as 2025-01-31T12:00:00Z')
  }
  if (!isWithinSkewExactly(emittedAtMs, ts as string, rules.requestTimeMs, rules.requestTimestamp)) {
    return fail('invalid_timestamp', `ts must be within ${MAX_SKEW_MS / 1000} seconds of X-Svc-Timestamp`)
  }
  if (typeof token !== 'string' || !rules.chains.some((chain) => isValidToken(chain, token))) {
    return fail('invalid_token', `token is not a valid address on the declared chains (${rules.chains.join(', ')})`)
  }
  if (typeof severity !== 'string' || !rules.severityLevels.includes(severity)) {
    return fail('invalid_severity', `severity ${echo(severity)} is not one of the manifest's severity_levels`)
  }
  const hasConfidence = Object.hasOwn(value, 'confidence')
  // JSON `50.0` parses to the number 50, an integer: accepted. "50", 50.5, true, null: not.
  if (hasConfidence && !(typeof confidence === 'number' && Number.isInteger(confidence) && confidence >= 0 && confidence <= 100)) {
    return fail('invalid_confidence', 'confidence must be an integer from 0 to 100')
  }
  const hasNote = Object.hasOwn(value, 'note')
  if (hasNote && !(typeof note === 'string' && codePointsAtMost(note, NOTE_MAX_CODE_POINTS))) {
    return fail('invalid_note', `note must be a string of at most ${NOTE_MAX_CODE_POINTS} characters`)
  }

  const signal: SignalPayload = { signal_id, source_id: rules.sourceId, ts: ts as string, token, severity }
  if (hasConfidence) signal.confidence = confidence as number
  if (hasNote) signal.note = note as string
  return { ok: true, signal, emittedAtMs }
}

function fail(code: ErrorCode, message: string): FieldCheck {
  return { ok: false, code, message }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false
  const proto: unknown = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

/**
 * Counts Unicode code points, not UTF-16 units, because a note's limit of 280
 * characters is what a person counts: an emoji is one character but two UTF-16 units,
 * and a note of 280 emoji must pass. (Grapheme clusters would be kinder still but are not
 * stable across Unicode versions, and JSON Schema's maxLength counts code points.)
 */
function codePointsAtMost(s: string, max: number): boolean {
  // Every code point is one or two units, so the length bounds the count both ways.
  if (s.length <= max) return true
  if (s.length > 2 * max) return false
  let count = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    // The low half of a surrogate pair is part of the code point already counted.
    const lowOfPair = c >= 0xdc00 && c <= 0xdfff && i > 0 && isHighSurrogate(s.charCodeAt(i - 1))
    if (!lowOfPair && ++count > max) return false
  }
  return true
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff
}

/** User input for a message: JSON-quoted, at most ECHO_MAX units, never half a surrogate pair. */
function echo(v: unknown): string {
  if (typeof v !== 'string') return v === undefined ? '(missing)' : `(${v === null ? 'null' : typeof v})`
  if (v.length <= ECHO_MAX) return JSON.stringify(v)
  const end = isHighSurrogate(v.charCodeAt(ECHO_MAX - 1)) ? ECHO_MAX - 1 : ECHO_MAX
  return `${JSON.stringify(v.slice(0, end))}…`
}
