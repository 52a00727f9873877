/**
 * Strict JSON for ingest bodies: duplicate keys, lone surrogates and non-UTF-8 are
 * `invalid_body`. The signature covers the raw bytes and renters receive a
 * re-serialised event, so any input that two JSON parsers could read differently is
 * refused rather than interpreted:
 *
 * - invalid UTF-8, and a byte order mark (JSON.parse would read U+FEFF as garbage,
 *   other parsers skip it);
 * - duplicate keys in any object, compared after escape decoding
 *   (`{"a":1,"\u0061":2}`): first-wins and last-wins parsers disagree;
 * - `\uXXXX` escapes that leave a lone surrogate: not a Unicode string, and
 *   re-encoding them to UTF-8 is lossy;
 * - numbers that a double cannot hold to the digit: more than 15 significant digits
 *   (`100.0000000000000001` reads as 100 here, and as more than 100 in a decimal
 *   parser), or beyond the normal range of a double (`1e400`, `1e-400`). Up to 15
 *   digits a number survives the round trip through a double, so the re-serialised
 *   event says what the signed body said;
 * - nesting deeper than MAX_DEPTH containers;
 * - `__proto__` keys, which become prototype setters as soon as someone copies the
 *   value with `Object.assign` or a spread into a plain object literal.
 *
 * One pass over the bytes tracks strings, brackets and object keys without building
 * anything but the keys; then JSON.parse (native) builds the value and rejects every
 * remaining syntax error. So the scanner must be exact on valid JSON and merely
 * terminate on anything else. It reads bytes, not the decoded string: every byte
 * it looks for is ASCII, UTF-8 never uses bytes below 0x80 inside a multi-byte
 * character, and a Uint8Array loop measured about 2.8 times faster than charCodeAt.
 */

/** `reason` completes "body is not valid JSON: ..." and never quotes the input. */
export type StrictJson = { ok: true; value: unknown } | { ok: false; reason: string }

/** Containers (objects or arrays) open at once. Signal payloads are flat; 32 is generous. */
export const MAX_DEPTH = 32

// fatal: invalid UTF-8 throws instead of becoming U+FFFD. ignoreBOM: keep a BOM in
// the output rather than silently stripping it (it is refused before decoding anyway).
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

const QUOTE = 0x22
const BACKSLASH = 0x5c
const LOWER_U = 0x75
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const COMMA = 0x2c
const MINUS = 0x2d
const DOT = 0x2e
const ZERO = 0x30
const NINE = 0x39
const LOWER_E = 0x65
const UPPER_E = 0x45
const PLUS = 0x2b

/** Significant digits every double holds exactly through a decimal round trip (DBL_DIG). */
export const MAX_SIGNIFICANT_DIGITS = 15
const MIN_NORMAL = 2.2250738585072014e-308

/**
 * Keys seen so far in the object open at each depth. Reused across calls (the parse
 * is synchronous, so never shared between two bodies) to avoid allocating per body.
 * Up to LINEAR_KEYS keys a linear search over an array beats hashing into a Set;
 * past that a Set keeps a 16 KB object of tiny keys linear.
 */
const keysAtDepth: string[][] = []
const setsAtDepth: (Set<string> | undefined)[] = []
const LINEAR_KEYS = 16

export function parseStrictJson(bytes: Uint8Array): StrictJson {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return refuse('it starts with a byte order mark')
  let text: string
  try {
    text = decoder.decode(bytes)
  } catch {
    return refuse('it is not valid UTF-8')
  }
  const problem = scan(bytes, text)
  if (problem !== undefined) return refuse(problem)
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    // V8's message quotes the input; the reason stays generic instead.
    return refuse('syntax error')
  }
}

function refuse(reason: string): StrictJson {
  return { ok: false, reason }
}

/** The first strictness problem in `b` (whose decoding is `text`), or undefined. */
function scan(b: Uint8Array, text: string): string | undefined {
  const n = b.length
  let depth = 0
  // Bit d − 1 is set while the container at depth d is an object; depth ≤ 32 fits.
  let objectBits = 0
  let expectKey = false
  let i = 0
  while (i < n) {
    const c = b[i]
    if (c === QUOTE) {
      const start = i + 1
      let j = start
      let escaped = false
      for (;;) {
        if (j >= n) return 'unterminated string'
        const d = b[j]
        if (d === QUOTE) break
        if (d !== BACKSLASH) {
          j++
          continue
        }
        escaped = true
        if (b[j + 1] !== LOWER_U) {
          // \" \\ \/ \b \f \n \r \t; JSON.parse refuses any other letter.
          j += 2
          continue
        }
        const unit = hex4(b, j + 2)
        if (unit < 0) return 'invalid \\u escape'
        if (unit >= 0xdc00 && unit <= 0xdfff) return 'lone low surrogate in a \\u escape'
        if (unit >= 0xd800 && unit <= 0xdbff) {
          // A high surrogate counts only when the very next thing is an escaped low one.
          const low = b[j + 6] === BACKSLASH && b[j + 7] === LOWER_U ? hex4(b, j + 8) : -1
          if (low < 0xdc00 || low > 0xdfff) return 'lone high surrogate in a \\u escape'
          j += 12
        } else {
          j += 6
        }
      }
      if (expectKey) {
        const problem = addKey(keyOf(b, text, start, j, escaped), depth)
        if (problem !== undefined) return problem
        expectKey = false
      }
      i = j + 1
      continue
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > MAX_DEPTH) return `nesting deeper than ${MAX_DEPTH}`
      const bit = 1 << (depth - 1)
      if (c === OPEN_BRACE) {
        objectBits |= bit
        const keys = keysAtDepth[depth]
        if (keys === undefined) keysAtDepth[depth] = []
        else keys.length = 0
        setsAtDepth[depth] = undefined
        expectKey = true
      } else {
        objectBits &= ~bit
        expectKey = false
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth === 0) return 'unbalanced brackets'
      depth--
      expectKey = false
    } else if (c === COMMA) {
      expectKey = depth > 0 && (objectBits & (1 << (depth - 1))) !== 0
    } else if (c === MINUS || (c !== undefined && c >= ZERO && c <= NINE)) {
      const end = numeral(b, i)
      if (typeof end === 'string') return end
      i = end
      continue
    }
    i++
  }
  return undefined
}

const isDigit = (c: number | undefined) => c !== undefined && c >= ZERO && c <= NINE

/**
 * The end of the numeral starting at `b[i]`, or why it is refused. Only a well-formed
 * numeral is judged: anything else is left for JSON.parse to refuse.
 */
function numeral(b: Uint8Array, i: number): number | string {
  let j = i
  if (b[j] === MINUS) j++
  // Positions, in the run of mantissa digits, of the first and last digit other than 0.
  let digits = 0
  let first = -1
  let last = -1
  const mantissa = () => {
    while (isDigit(b[j])) {
      if (b[j] !== ZERO) {
        if (first < 0) first = digits
        last = digits
      }
      digits++
      j++
    }
  }
  mantissa()
  if (b[j] === DOT) {
    j++
    mantissa()
  }
  const exponent = b[j] === LOWER_E || b[j] === UPPER_E
  if (exponent) {
    j++
    if (b[j] === PLUS || b[j] === MINUS) j++
    while (isDigit(b[j])) j++
  }
  if (first < 0) return j
  if (last - first + 1 > MAX_SIGNIFICANT_DIGITS) return `a number has more than ${MAX_SIGNIFICANT_DIGITS} significant digits, more than a double holds exactly`
  // Without an exponent, 15 digits can neither overflow nor underflow (the usual case: an integer).
  if (!exponent) return j
  const value = Math.abs(Number(Buffer.from(b.buffer, b.byteOffset + i, j - i).toString('latin1')))
  if (!Number.isNaN(value) && (value === Number.POSITIVE_INFINITY || value < MIN_NORMAL)) return 'a number is beyond the range of a double'
  return j
}

/**
 * The decoded key between the quotes at byte offsets `start - 1` and `end`, or
 * undefined if it does not decode. In an all-ASCII body (the usual case) byte
 * offsets are string offsets, so the key is a slice of the text already decoded.
 */
function keyOf(b: Uint8Array, text: string, start: number, end: number, escaped: boolean): string | undefined {
  const ascii = text.length === b.length
  if (!escaped) return ascii ? text.slice(start, end) : decoder.decode(b.subarray(start, end))
  // Escaped keys are rare: JSON.parse decodes the literal, quotes included.
  const literal = ascii ? text.slice(start - 1, end + 1) : decoder.decode(b.subarray(start - 1, end + 1))
  try {
    return JSON.parse(literal) as string
  } catch {
    return undefined
  }
}

/** Records `key` for the object at `depth`; a problem if it is refused. */
function addKey(key: string | undefined, depth: number): string | undefined {
  if (key === undefined) return 'syntax error'
  if (key === '__proto__') return 'forbidden key "__proto__"'
  const set = setsAtDepth[depth]
  if (set !== undefined) {
    if (set.has(key)) return duplicate(key)
    set.add(key)
    return undefined
  }
  const keys = keysAtDepth[depth]!
  if (keys.includes(key)) return duplicate(key)
  keys.push(key)
  if (keys.length > LINEAR_KEYS) setsAtDepth[depth] = new Set(keys)
  return undefined
}

function duplicate(key: string): string {
  return `duplicate key ${JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key)}`
}

/** The value of the 4 hex digits at `b[at]`, or −1. */
function hex4(b: Uint8Array, at: number): number {
  let v = 0
  for (let k = at; k < at + 4; k++) {
    const c = b[k]
    let d: number
    if (c === undefined) return -1
    if (c >= 0x30 && c <= 0x39) d = c - 0x30
    else if (c >= 0x61 && c <= 0x66) d = c - 0x57
    else if (c >= 0x41 && c <= 0x46) d = c - 0x37
    else return -1
    v = (v << 4) | d
  }
  return v
}
