import { isIP } from 'node:net'
import { buildConnector } from 'undici'
import { resolveAllowed, type AddressGuardOptions } from './webhook-url.js'

/**
 * An undici connector that resolves the host itself, checks every address, and connects
 * to the address it checked: a DNS answer that changes between the check and the connect
 * (rebinding) cannot send the connection elsewhere, since nothing resolves the name
 * again. TLS still names the host (SNI and certificate check), so https stays https.
 */
export function guardedConnector(options: AddressGuardOptions & { readonly timeoutMs: number }): buildConnector.connector {
  const connect = buildConnector({ timeout: options.timeoutMs })
  return (opts, callback) => {
    const host = opts.hostname.startsWith('[') ? opts.hostname.slice(1, -1) : opts.hostname
    resolveAllowed(host, options).then(
      (addresses) => {
        const pinned = addresses[0]!.address
        connect({ ...opts, hostname: pinned, servername: opts.servername ?? (isIP(host) === 0 ? host : undefined) } as buildConnector.Options, callback)
      },
      (err: unknown) => callback(err as Error, null),
    )
  }
}
