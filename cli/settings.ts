import type { Command } from 'commander'
import { usageError } from './exit-codes.js'

/** What every command reads: the gateway, the token, and how to print. */
export interface Settings {
  readonly url: string
  /** Undefined when neither --token nor SGW_TOKEN gives one. */
  readonly token: string | undefined
  readonly json: boolean
}

/** The global options, where a flag wins over its variable: --url (SGW_URL), --token (SGW_TOKEN), --json. */
export function settingsOf(command: Command): Settings {
  const o = command.optsWithGlobals<{ url?: string; token?: string; json?: boolean }>()
  const url = o.url ?? process.env['SGW_URL'] ?? 'http://127.0.0.1:8080'
  try {
    new URL(url)
  } catch {
    throw usageError(`--url (or SGW_URL) is not a URL: ${url}`)
  }
  const token = o.token ?? (process.env['SGW_TOKEN'] || undefined)
  return { url, token, json: o.json === true }
}

/** The token, for a command that needs one; its absence is a usage error, not a 401. */
export function tokenOf(s: Settings): string {
  if (s.token === undefined) throw usageError('this command needs a token: --token <token> or SGW_TOKEN')
  return s.token
}
