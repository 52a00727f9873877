import type { Principal } from '../../registry/index.js'
import { ApiError } from '../../schemas/index.js'
import { isKvError } from '../../storage/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { closedQuery } from '../control/query.js'
import type { UsageMeter } from './usage-meter.js'

const ROLES = ['admin', 'creator', 'renter'] as const
const SUBJECT = /^[A-Za-z0-9_:.-]{1,128}$/

/** `month`: `YYYY-MM`, the current UTC month when absent. */
function monthOf(query: URLSearchParams, now: number): string {
  const raw = query.get('month')
  if (raw === null) return new Date(now).toISOString().slice(0, 7)
  if (!/^\d{4}-(0[1-9]|1[0-2])$/.test(raw)) throw new ApiError('invalid_request', 'month must be YYYY-MM, such as 2030-01')
  return raw
}

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
    closedQuery(query, ['month'])
    return { status: 200, data: await read(meter, own(principal), monthOf(query, now())) }
  })

  jsonRoute(parts, 'get', '/v1/admin/usage', { access: 'admin' }, async ({ query }) => {
    closedQuery(query, ['principal', 'month'])
    const raw = query.get('principal')
    const colon = raw === null ? -1 : raw.indexOf(':')
    const role = raw === null ? '' : raw.slice(0, colon)
    const subject = raw === null ? '' : raw.slice(colon + 1)
    if (colon < 0 || !(ROLES as readonly string[]).includes(role) || !SUBJECT.test(subject)) {
      throw new ApiError('invalid_request', 'principal must be role:subject, the role admin, creator or renter (such as renter:acme)')
    }
    return { status: 200, data: await read(meter, { role, subject }, monthOf(query, now())) }
  })
}

const own = (p: Principal) => ({ role: p.role, subject: p.subject })
