import { parseIsoUtc } from '../../pipeline/index.js'
import { ApiError, ClientId, Cursor, SourceId } from '../../schemas/index.js'

/**
 * How one query parameter is read: `raw` is its value, undefined when the query does not
 * give it. A value it does not take throws `400 invalid_request` with a message that
 * starts with `name`.
 */
export type QueryRule<T> = (raw: string | undefined, name: string) => T

export type QueryRules = Readonly<Record<string, QueryRule<unknown>>>

export type ParsedQuery<R extends QueryRules> = { readonly [K in keyof R]: ReturnType<R[K]> }

/**
 * The query string of every endpoint that reads one, by the same rules everywhere:
 *
 * - The endpoint names each parameter it takes (`rules`); any other is
 *   `400 invalid_request` naming it, so a typo (`?creator=`) is an error rather than a
 *   list silently left unfiltered. An endpoint that takes none names none.
 * - A parameter given more than once is `400 invalid_request` naming it, whatever the
 *   values (`limit=1&limit=2` would otherwise mean whichever the code happened to read).
 * - Each value given, an empty one (`?source_id=`) included, is checked by its rule; a
 *   value the rule does not take is `400 invalid_request` naming the parameter.
 * - A parameter left out takes its rule's default: none (undefined) for a filter.
 *
 * Names and values are percent-decoded first (`lim%69t` is `limit`). The rules are checked
 * in the order `rules` lists them, after the names, so the first problem is the one named.
 */
export function parseQuery<R extends QueryRules>(query: URLSearchParams, rules: R): ParsedQuery<R> {
  const seen = new Set<string>()
  for (const name of query.keys()) {
    if (!Object.hasOwn(rules, name)) {
      const takes = Object.keys(rules)
      throw new ApiError('invalid_request', `unknown query parameter ${clip(name)}; this endpoint takes ${takes.length === 0 ? 'none' : takes.join(', ')}`)
    }
    if (seen.has(name)) throw new ApiError('invalid_request', `query parameter ${name} is given more than once`)
    seen.add(name)
  }
  const parsed: Record<string, unknown> = {}
  for (const [name, rule] of Object.entries(rules)) parsed[name] = rule(query.get(name) ?? undefined, name)
  return parsed as ParsedQuery<R>
}

/** A rule for a parameter with no default: undefined when left out, else `read` of its value. */
export function optional<T>(read: (raw: string, name: string) => T): QueryRule<T | undefined> {
  return (raw, name) => (raw === undefined ? undefined : read(raw, name))
}

/** `rule`, with `value` when the parameter is left out. */
export function withDefault<T>(rule: QueryRule<T | undefined>, value: T): QueryRule<T> {
  return (raw, name) => rule(raw, name) ?? value
}

/** A value matching `pattern`; `shape` says in words what that is, for the message. */
function matching(pattern: RegExp, shape: string): QueryRule<string | undefined> {
  return optional((raw, name) => {
    if (!pattern.test(raw)) throw new ApiError('invalid_request', `${name} must be ${shape}`)
    return raw
  })
}

/** A string schema's pattern with its length bounds, as one expression (the schema keeps them apart). */
function schemaPattern(schema: object): RegExp {
  const { pattern, minLength, maxLength } = schema as { pattern: string; minLength: number; maxLength: number }
  return new RegExp(`^(?=.{${minLength},${maxLength}}$)${pattern.replace(/^\^/, '')}`, 's')
}

const CURSOR = schemaPattern(Cursor)

/** The one refusal of a cursor, whichever check finds it bad. */
export const badCursor = (why = 'it is not one this endpoint returned') => new ApiError('invalid_request', `cursor is not valid: ${why}`)

/** The rules parameters are read by. */
export const param = {
  /** An id a client chose (creator and renter subjects, agent ids), as the schemas define it. */
  clientId: matching(schemaPattern(ClientId), 'an id of 1 to 128 of A-Z a-z 0-9 _ : . - (not . or ..)'),
  /** A source id, as the gateway issues them. */
  sourceId: matching(schemaPattern(SourceId), 'a source id: src_ and 16 of A-Z a-z 0-9 _ -'),
  /** A value matching `pattern`, described by `shape` in the message. */
  matching,
  /** One of `values`. */
  oneOf<T extends string>(values: readonly T[]): QueryRule<T | undefined> {
    return optional((raw, name) => {
      if (!(values as readonly string[]).includes(raw)) throw new ApiError('invalid_request', `${name} must be ${words(values)}`)
      return raw as T
    })
  },
  /** `true` or `false`; false when left out. */
  flag: ((raw, name) => {
    if (raw === undefined || raw === 'false') return false
    if (raw === 'true') return true
    throw new ApiError('invalid_request', `${name} must be true or false`)
  }) as QueryRule<boolean>,
  /** An ISO 8601 UTC time, in milliseconds (as parseIsoUtc reads it). */
  instant: optional((raw, name) => {
    const ms = parseIsoUtc(raw)
    if (ms === undefined) throw new ApiError('invalid_request', `${name} must be an ISO 8601 UTC time, such as 2030-01-31T12:00:00Z`)
    return ms
  }),
  /**
   * A list's page size: 1 to `page.max`, `page.default` when left out. Digits only, at
   * most four: Number() would also take `1e2`, `0x10` and ` 5`.
   */
  limit(page: { readonly default: number; readonly max: number }): QueryRule<number> {
    return (raw, name) => {
      if (raw === undefined) return page.default
      const limit = /^[0-9]{1,4}$/.test(raw) ? Number(raw) : Number.NaN
      if (!(limit >= 1 && limit <= page.max)) throw new ApiError('invalid_request', `${name} must be an integer from 1 to ${page.max}`)
      return limit
    }
  },
  /**
   * The previous page's `next_cursor`, in the shape every list's cursors have; the list
   * then checks it names something of its own (badCursor otherwise).
   */
  cursor: optional((raw) => {
    if (!CURSOR.test(raw)) throw badCursor()
    return raw
  }),
  /** A value the endpoint checks itself, where it must be checked against state (a resume point, a ticket). */
  given: optional((raw) => raw),
} as const

const words = (values: readonly string[]) => (values.length <= 2 ? values.join(' or ') : `${values.slice(0, -1).join(', ')} or ${values[values.length - 1]}`)

/** A client's parameter name in a message, bounded: the query can be most of the request head. */
const clip = (name: string) => JSON.stringify(name.length <= 64 ? name : `${name.slice(0, 64)}…`)
