import { writeFileSync } from 'node:fs'
import { CliError, usageError } from './exit-codes.js'
import { enc, gatewayCall, type CallAnswer } from './gateway-call.js'
import { note } from './output.js'
import type { Settings } from './settings.js'

/**
 * A receipt's proof bundle (GET /v1/byo/receipts/:receipt_id/proof). A receipt is in a
 * checkpoint about a second after its 202; until then the route answers 409
 * not_yet_logged with Retry-After: 1, and this waits (a second at a time) up to `waitS`
 * seconds for it rather than failing a script that asks right after a push.
 */
export async function fetchProof(s: Settings, receiptId: string, waitS: number): Promise<CallAnswer> {
  const until = Date.now() + waitS * 1000
  let said = false
  for (;;) {
    try {
      return await gatewayCall(s, 'GET', `/v1/byo/receipts/${enc(receiptId)}/proof`, s.token === undefined ? { anonymous: true } : {})
    } catch (err) {
      if (!(err instanceof CliError && err.apiCode === 'not_yet_logged') || Date.now() + 1000 > until) throw err
      if (!said) note(`${receiptId}: not yet in a checkpoint; waiting up to ${waitS} s`)
      said = true
      await new Promise((resolve) => setTimeout(resolve, 1000))
    }
  }
}

/** Writes the bundle to `path`, never over an existing file (exit 2, as keygen). */
export function writeBundle(path: string, bundle: unknown): void {
  try {
    writeFileSync(path, `${JSON.stringify(bundle, null, 2)}\n`, { flag: 'wx' })
  } catch (err) {
    throw usageError((err as NodeJS.ErrnoException).code === 'EEXIST' ? `${path} exists; not overwritten` : `cannot write ${path}: ${(err as Error).message}`)
  }
}
