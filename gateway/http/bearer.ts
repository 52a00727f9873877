import type { Principal, Registry } from '../../registry/index.js'

const BEARER = /^Bearer ([\x21-\x7e]{1,256})$/

/** The principal of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerPrincipal(registry: Registry, authorization: string): Principal | undefined {
  const match = BEARER.exec(authorization)
  return match === null ? undefined : registry.authenticate(match[1] as string)
}
