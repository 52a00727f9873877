import { MAX_TOKEN_CHARS } from '../../registry/index.js'
import type { Principal, Registry } from '../../registry/index.js'
import type { HttpRequest } from './uws.js'

/**
 * The scheme is case-insensitive (RFC 9110 section 11.1); the token is not. One or more
 * spaces separate them (`1*SP`, RFC 6750 section 2.1), never a tab.
 */
const BEARER = new RegExp(`^bearer +([\\x21-\\x7e]{1,${MAX_TOKEN_CHARS}})$`, 'i')

/** The principal of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerPrincipal(registry: Registry, authorization: string): Principal | undefined {
  const match = BEARER.exec(authorization)
  return match === null ? undefined : registry.authenticate(match[1] as string)
}

/**
 * The principal of a request's one `Authorization` header. uWS returns the first of
 * repeated headers; two credentials are refused, not half-read.
 */
export function requestPrincipal(registry: Registry, req: HttpRequest): Principal | undefined {
  let count = 0
  req.forEach((name) => {
    if (name === 'authorization') count++
  })
  return count === 1 ? bearerPrincipal(registry, req.getHeader('authorization')) : undefined
}
