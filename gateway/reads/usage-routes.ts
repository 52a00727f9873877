import type { Principal } from '../../registry/index.js'
import { ApiError } from '../../schemas/index.js'
import { isKvError } from '../../storage/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { param, parseQuery, type QueryRule } from '../http/query.js'
import type { UsageMeter } from './usage-meter.js'

const ROLES = ['admin', 'creator', 'renter'] as const

/** `month`: `YYYY-MM`; the route takes the current UTC month when it is left out. */
const month = param.matching(/^\d{4}-(0[1-9]|1[0-2])$/, 'YYYY-MM, such as 2030-01')

/** `principal`, required: `role:subject`, the subject as token subjects are. */
const principalParam: QueryRule<{ role: string; subject: string }> = (raw, name) => {
  const colon = raw?.indexOf(':') ?? -1
  const role = raw?.slice(0, colon) ?? ''
  if (raw === undefined || colon < 0 || !(ROLES as readonly string[]).includes(role)) {
    throw new ApiError('invalid_request', `${name} must be role:subject, the role admin, creator or renter (such as renter:acme)`)
  }
  return { role, subject: param.clientId(raw.slice(colon + 1), `${name}'s subject`) as string }
}

const monthOrNow = (given: string | undefined, now: number) => given ?? new Date(now).toISOString().slice(0, 7)

async function read(meter: UsageMeter, caller: { role: string; subject: string }, month: string) {
  try {
    return await meter.read(caller, month)
  } catch (err) {
    if (isKvError(err) && err.transient) throw new ApiError('overloaded', 'the usage store is unavailable for a moment; retry', { retryAfter: 1, cause: err })
    throw err
  }
}

/**
 * Metered use: the rows each caller exported, by UTC month and day. A caller reads its
 * own; the admin reads anyone's, named `role:subject`.
 */
export function registerUsageRoutes(parts: JsonRoutesParts, meter: UsageMeter, now: () => number = Date.now): void {
  jsonRoute(parts, 'get', '/v1/usage', { access: 'any' }, async ({ principal, query }) => {
    if (!(ROLES as readonly string[]).includes(principal.role)) throw new ApiError('forbidden', 'this token has no metered use')
    const p = parseQuery(query, { month })
    return { status: 200, data: await read(meter, own(principal), monthOrNow(p.month, now())) }
  })

  jsonRoute(parts, 'get', '/v1/admin/usage', { access: 'admin' }, async ({ query }) => {
    const p = parseQuery(query, { principal: principalParam, month })
    return { status: 200, data: await read(meter, p.principal, monthOrNow(p.month, now())) }
  })
}

const own = (p: Principal) => ({ role: p.role, subject: p.subject })
