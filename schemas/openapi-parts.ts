import { ERROR_STATUS } from './api-error.js'

/** Building blocks of the OpenAPI document, shared by its parts. */

export const json = (schema: unknown) => ({ content: { 'application/json': { schema } } })
export const ok = (data: unknown) => json({ type: 'object', properties: { ok: { const: true }, data } })
const codesFor = (status: number) =>
  `error codes: ${Object.entries(ERROR_STATUS)
    .filter(([, s]) => s === status)
    .map(([c]) => c)
    .join(', ')}`
export const errors = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [String(s), { description: codesFor(s), ...json({ $ref: '#/components/schemas/ErrorBody' }) }]))
export const bearer = [{ bearer: [] }]
/**
 * What every bearer route may answer besides its own: 401 without a valid token, 403
 * for a token of the wrong role, 503 while draining. A route with a body adds 400
 * (not JSON, or not in time), 413 (too large) and 503 (too many slow uploads).
 */
export const control = (...own: number[]) => errors(...new Set([401, 403, 503, ...own].sort((a, b) => a - b)))
export const withBody = (...own: number[]) => control(400, 413, ...own)
/** Actions that take no input: no body at all, or `{}`. */
export const noInput = { required: false, ...json({ type: 'object', maxProperties: 0 }) }
export const path = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } })
export const nullable = (type: string, extra: Record<string, unknown> = {}) => ({ type: [type, 'null'], ...extra })
export const time = { type: 'string', format: 'date-time' }
