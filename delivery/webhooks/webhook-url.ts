import { lookup as dnsLookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { addressRefusal } from './address-policy.js'

/** The longest webhook URL taken: longer is no endpoint anyone types, and it is stored and shown. */
export const MAX_WEBHOOK_URL_CHARS = 2048

export interface ResolvedAddress {
  readonly address: string
  readonly family: number
}

/** Resolves a host name to every address it has (dns.lookup with `all`); tests inject one. */
export type HostLookup = (hostname: string) => Promise<readonly ResolvedAddress[]>

export const systemLookup: HostLookup = (hostname) => dnsLookup(hostname, { all: true, verbatim: true })

export interface AddressGuardOptions {
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: every address and plain http allowed (development and tests). */
  readonly allowPrivate: boolean
  readonly lookup: HostLookup
}

/** The highest TCP port; the lowest is 1 (port 0 cannot be connected to). */
const MAX_PORT = 65_535
/** The digits after the last `:` of a URL's authority (after any IPv6 literal's `]`): its port. */
const PORT_IN_AUTHORITY = /^[a-z][a-z0-9+.-]*:\/\/(?:[^/?#@]*@)?(?:\[[^\]/?#]*\]|[^:/?#@[\]]*):(\d+)(?:[/?#]|$)/i

function portRefusal(port: string): WebhookUrlError {
  return new WebhookUrlError(`the port ${port.replace(/^0+(?=\d)/, '').slice(0, 20)} is not a TCP port from 1 to ${MAX_PORT}`)
}

/** A webhook URL refused, with the reason the renter is told (`400 invalid_webhook_url`). */
export class WebhookUrlError extends Error {
  readonly code = 'invalid_webhook_url'
  constructor(message: string) {
    super(message)
    this.name = 'WebhookUrlError'
  }
}

/** The host of a URL as an address or a name: IPv6 literals lose their brackets. */
export function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
}

/**
 * Resolves `hostname` and checks every address it resolves to: one refused address
 * refuses the name (a name with a public and a private answer must not let the private
 * one through on the next lookup). An IP literal is checked as it is, without DNS.
 */
export async function resolveAllowed(hostname: string, options: AddressGuardOptions): Promise<ResolvedAddress[]> {
  const family = isIP(hostname)
  let addresses: ResolvedAddress[]
  if (family !== 0) addresses = [{ address: hostname, family }]
  else {
    try {
      addresses = [...(await options.lookup(hostname))]
    } catch (err) {
      throw new WebhookUrlError(`the host ${hostname} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'lookup failed'})`)
    }
    if (addresses.length === 0) throw new WebhookUrlError(`the host ${hostname} does not resolve`)
  }
  if (!options.allowPrivate) {
    for (const { address } of addresses) {
      const reason = addressRefusal(address)
      if (reason !== undefined) {
        // A name's answer is not repeated: the operator's resolver may know internal names whose
        // addresses a renter must not learn by registering them. The kind of address is enough.
        throw new WebhookUrlError(family !== 0 ? `${address} is ${reason}` : `the host ${hostname} resolves to ${reason}`)
      }
    }
  }
  return addresses
}

/**
 * Checks a webhook URL as a renter registers it: https (http too when private networks
 * are allowed), no credentials, no fragment, and a host whose every address is public.
 * The WHATWG URL parser has already turned decimal, octal and hex IPv4 forms
 * (`http://2130706433/`, `http://0x7f.1/`) into dotted quads, so they are judged as such.
 * Resolves with the URL as it will be called.
 */
export async function checkWebhookUrl(raw: string, options: AddressGuardOptions): Promise<string> {
  if (raw.length > MAX_WEBHOOK_URL_CHARS) throw new WebhookUrlError(`the url must be at most ${MAX_WEBHOOK_URL_CHARS} characters`)
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    // The parser throws on a port past 65535 without saying why: name the port, as for port 0.
    const port = PORT_IN_AUTHORITY.exec(raw)?.[1]
    if (port !== undefined && Number(port) > MAX_PORT) throw portRefusal(port)
    throw new WebhookUrlError('the url is not an absolute URL')
  }
  if (url.protocol !== 'https:' && !(options.allowPrivate && url.protocol === 'http:')) {
    throw new WebhookUrlError(options.allowPrivate ? 'the url must use https or http' : 'the url must use https')
  }
  if (url.username !== '' || url.password !== '') throw new WebhookUrlError('the url must not carry a user name or password; verify deliveries by their signature')
  if (url.hash !== '') throw new WebhookUrlError('the url must not have a fragment')
  // Port 0 parses (an explicit port equal to the scheme's default reads as ''), yet no
  // connection can be made to it: every delivery would fail, so it is refused up front.
  if (url.port !== '' && Number(url.port) < 1) throw portRefusal(url.port)
  await resolveAllowed(bareHost(url), options)
  return url.href
}
