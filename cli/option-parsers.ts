import { readFileSync } from 'node:fs'
import { InvalidArgumentError } from 'commander'

/** A whole number from 1 up, for counts and limits. */
export function positiveInt(raw: string): number {
  if (!/^[0-9]{1,9}$/.test(raw) || Number(raw) < 1) throw new InvalidArgumentError('a whole number from 1 up')
  return Number(raw)
}

/** A whole number from 0 up, for delays. */
export function nonNegativeInt(raw: string): number {
  if (!/^[0-9]{1,9}$/.test(raw)) throw new InvalidArgumentError('a whole number from 0 up')
  return Number(raw)
}

/** A JSON object given inline, or read from a file as `@path`. */
export function jsonObject(raw: string): Record<string, unknown> {
  let text = raw
  if (raw.startsWith('@')) {
    try {
      text = readFileSync(raw.slice(1), 'utf8')
    } catch (err) {
      throw new InvalidArgumentError(`cannot read ${raw.slice(1)}: ${(err as Error).message}`)
    }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw new InvalidArgumentError(`not JSON: ${(err as Error).message}`)
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidArgumentError('a JSON object, inline or as @file')
  return value as Record<string, unknown>
}

/** An ISO 8601 UTC time, passed on as written (the gateway checks its form). */
export function isoTime(raw: string): string {
  if (Number.isNaN(Date.parse(raw)) || !/(Z|\+00:00)$/.test(raw)) throw new InvalidArgumentError('an ISO 8601 UTC time, such as 2030-01-31T12:00:00Z')
  return raw
}
