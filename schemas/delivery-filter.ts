import Type from 'typebox'

/**
 * A rental's delivery filter, set by its renter: which of its source's signals reach it
 * on every channel (streams, polling, webhooks). Each field is optional; a signal passes
 * when it passes every field given. The lists are bounded so that a stored filter stays
 * small in the rental's record and checking it costs little per event.
 */
export const FILTER_LIMITS = {
  /** A manifest declares at most 16 severity levels. */
  severities: 16,
  tokens: 100,
} as const

/** Token addresses as the ingest schema takes them: EVM `0x` and 40 hex digits, or Solana base58 of 32 to 44 characters. */
const TOKEN_TEXT = /^(0x[0-9a-fA-F]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$/
const EVM_TOKEN = /^0x[0-9a-fA-F]{40}$/

export const DeliveryFilter = Type.Object(
  {
    severity: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 32, pattern: '^[A-Za-z0-9_-]+$' }), { minItems: 1, maxItems: FILTER_LIMITS.severities, description: "only these severities (of the source's severity_levels)" })),
    tokens: Type.Optional(Type.Array(Type.String({ pattern: TOKEN_TEXT.source }), { minItems: 1, maxItems: FILTER_LIMITS.tokens, description: 'only these tokens; EVM addresses compare without regard to case' })),
    min_confidence: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, description: 'only signals with a confidence of at least this; a signal without one does not pass' })),
  },
  { additionalProperties: false },
)
export type DeliveryFilter = Type.Static<typeof DeliveryFilter>

/**
 * A token in the form filters compare: an EVM address in lower case (its mixed case is
 * only an EIP-55 checksum, the same address either way), a Solana address as it is
 * (base58 is case-sensitive: another case is another address).
 */
export function canonicalToken(token: string): string {
  return EVM_TOKEN.test(token) ? token.toLowerCase() : token
}

/**
 * A filter body read and stored in canonical form (tokens canonical and deduplicated,
 * severities deduplicated), or the problem that refuses it. `severityLevels` are the
 * source's declared levels: a severity it never sends would silently filter out everything.
 */
export function parseDeliveryFilter(body: unknown, severityLevels: readonly string[]): { ok: true; value: DeliveryFilter } | { ok: false; problem: string } {
  const fail = (problem: string) => ({ ok: false as const, problem })
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return fail('the body must be an object: {"severity": [...], "tokens": [...], "min_confidence": n}, each optional')
  const doc = body as Record<string, unknown>
  const extra = Object.keys(doc).find((k) => k !== 'severity' && k !== 'tokens' && k !== 'min_confidence')
  if (extra !== undefined) return fail(`unknown field ${JSON.stringify(extra).slice(0, 80)}; a filter takes severity, tokens and min_confidence`)
  const out: { severity?: string[]; tokens?: string[]; min_confidence?: number } = {}
  if (doc.severity !== undefined) {
    const list = doc.severity
    if (!Array.isArray(list) || list.length === 0 || list.length > FILTER_LIMITS.severities) return fail(`severity must be a list of 1 to ${FILTER_LIMITS.severities} severities`)
    for (const s of list) if (typeof s !== 'string' || !severityLevels.includes(s)) return fail(`severity ${JSON.stringify(s).slice(0, 40)} is not one of the source's severity_levels (${severityLevels.join(', ')})`)
    out.severity = [...new Set(list as string[])]
  }
  if (doc.tokens !== undefined) {
    const list = doc.tokens
    if (!Array.isArray(list) || list.length === 0 || list.length > FILTER_LIMITS.tokens) return fail(`tokens must be a list of 1 to ${FILTER_LIMITS.tokens} token addresses`)
    for (const token of list) if (typeof token !== 'string' || !TOKEN_TEXT.test(token)) return fail(`${JSON.stringify(token).slice(0, 60)} is not a token address (0x and 40 hex digits, or Solana base58)`)
    out.tokens = [...new Set((list as string[]).map(canonicalToken))]
  }
  if (doc.min_confidence !== undefined) {
    const n = doc.min_confidence
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 100) return fail('min_confidence must be an integer from 0 to 100')
    out.min_confidence = n
  }
  return { ok: true, value: out }
}

/** What a filter looks at of a signal. */
export interface FilteredFields {
  readonly severity: string
  readonly token: string
  readonly confidence: number | null
}

/** Whether a signal passes the filter; no filter (null, undefined or `{}`) passes everything. */
export function passesFilter(filter: DeliveryFilter | null | undefined, signal: FilteredFields): boolean {
  if (filter === null || filter === undefined) return true
  if (filter.severity !== undefined && !filter.severity.includes(signal.severity)) return false
  if (filter.tokens !== undefined && !filter.tokens.includes(canonicalToken(signal.token))) return false
  if (filter.min_confidence !== undefined && (signal.confidence === null || signal.confidence < filter.min_confidence)) return false
  return true
}
