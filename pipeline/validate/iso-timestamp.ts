/**
 * The one timestamp form the gateway accepts, for the payload `ts` and the
 * `X-Svc-Timestamp` header, both ISO 8601 in UTC:
 *
 *   YYYY-MM-DDTHH:MM:SS[.fraction]Z   or the same ending in +00:00
 *
 * A fraction has 1 to 9 digits (milliseconds to nanoseconds). Everything else
 * ISO 8601 or Date.parse would allow is refused: other offsets (a signed
 * timestamp must not be re-interpreted), lowercase `t`/`z`, basic format, missing
 * seconds, leap second 60, impossible dates (Date.UTC would roll Feb 30 into
 * March), years before 1970. Parsed by hand: it runs twice per request and
 * allocates nothing.
 */

/** The longest valid form is 35 characters; anything past 40 is refused unread. */
const MAX_LENGTH = 40
const MIN_YEAR = 1970
const MAX_FRACTION_DIGITS = 9

const DIGIT_0 = 0x30
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const

/** Milliseconds since the epoch, or undefined if `s` is not exactly that form. */
export function parseIsoUtc(s: string): number | undefined {
  if (typeof s !== 'string' || s.length < 20 || s.length > MAX_LENGTH) return undefined
  if (s[4] !== '-' || s[7] !== '-' || s[10] !== 'T' || s[13] !== ':' || s[16] !== ':') return undefined
  const year = digits(s, 0, 4)
  const month = digits(s, 5, 2)
  const day = digits(s, 8, 2)
  const hour = digits(s, 11, 2)
  const minute = digits(s, 14, 2)
  const second = digits(s, 17, 2)
  // digits() gives −1 for a non-digit, which every range check below refuses.
  if (year < MIN_YEAR || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59) return undefined

  let i = 19
  let ms = 0
  if (s[i] === '.') {
    const start = ++i
    while (i < s.length && isDigit(s.charCodeAt(i))) i++
    const count = i - start
    if (count < 1 || count > MAX_FRACTION_DIGITS) return undefined
    // Truncate to milliseconds: rounding could carry into the next second.
    for (let k = 0; k < 3; k++) ms = ms * 10 + (k < count ? s.charCodeAt(start + k) - DIGIT_0 : 0)
  }
  const utc = (s.length === i + 1 && s[i] === 'Z') || (s.length === i + 6 && s.startsWith('+00:00', i))
  if (!utc) return undefined
  return Date.UTC(year, month - 1, day, hour, minute, second, ms)
}

/**
 * The fraction's digits past the millisecond, as nanoseconds (0 to 999,999), of a string
 * parseIsoUtc accepted: with its result, the instant exactly, for comparisons that must
 * not round (two client timestamps 300.000999 s apart are more than 300 s apart).
 */
export function subMillisecondNanos(s: string): number {
  if (s[19] !== '.') return 0
  let nanos = 0
  for (let k = 3; k < MAX_FRACTION_DIGITS; k++) {
    const c = s.charCodeAt(20 + k)
    nanos = nanos * 10 + (isDigit(c) ? c - DIGIT_0 : 0)
  }
  return nanos
}

function daysIn(year: number, month: number): number {
  if (month === 2 && year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)) return 29
  return DAYS_IN_MONTH[month - 1] ?? 0
}

function isDigit(c: number): boolean {
  return c >= DIGIT_0 && c <= DIGIT_0 + 9
}

/** The decimal value of `count` digits at `at`, or −1 if any is not a digit. */
function digits(s: string, at: number, count: number): number {
  let v = 0
  for (let k = at; k < at + count; k++) {
    const c = s.charCodeAt(k)
    if (!isDigit(c)) return -1
    v = v * 10 + (c - DIGIT_0)
  }
  return v
}
