import { ApiError } from '../../schemas/index.js'

/**
 * The query of a list, closed like a body: a parameter it does not take, or one given
 * twice, is `400 invalid_request` naming it, so a typo (`?creator=`) is an error rather
 * than a list silently left unfiltered.
 */
export function closedQuery(query: URLSearchParams, allowed: readonly string[]): void {
  const seen = new Set<string>()
  for (const name of query.keys()) {
    if (!allowed.includes(name)) throw new ApiError('invalid_request', `unknown query parameter ${clip(name)}; this list takes ${allowed.join(', ')}`)
    if (seen.has(name)) throw new ApiError('invalid_request', `query parameter ${name} is given twice`)
    seen.add(name)
  }
}

/** An id filter: the shape of the ids it is compared with, else `400 invalid_request` naming it. */
export function idFilter(query: URLSearchParams, name: string): string | null {
  const value = query.get(name)
  if (value !== null && !/^[A-Za-z0-9_:.-]{1,128}$/.test(value)) throw new ApiError('invalid_request', `${name} must be 1 to 128 of A-Z a-z 0-9 _ : . -`)
  return value
}

/** A filter that takes one of `values`, else `400 invalid_request` naming them. */
export function oneOf<T extends string>(query: URLSearchParams, name: string, values: readonly T[]): T | null {
  const value = query.get(name)
  if (value !== null && !(values as readonly string[]).includes(value)) throw new ApiError('invalid_request', `${name} must be ${values.join(' or ')}`)
  return value as T | null
}

/** A client's parameter name in a message, bounded: the query can be most of the request head. */
const clip = (name: string) => JSON.stringify(name.length <= 64 ? name : `${name.slice(0, 64)}…`)
