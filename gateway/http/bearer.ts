import type { Principal, Registry } from '../../registry/index.js'
import type { HttpRequest } from './uws.js'

const BEARER = /^Bearer ([\x21-\x7e]{1,256})$/

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
