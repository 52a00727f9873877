import { readFileSync } from 'node:fs'
import type { Command } from 'commander'
import { verifyWebhook, WebhookVerificationError } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT, usageError } from '../exit-codes.js'
import { gatewayCall } from '../gateway-call.js'
import { printResult } from '../output.js'
import { settingsOf } from '../settings.js'

/**
 * `sgw verify-webhook`: says whether a delivery is valid, or why not. The headers come from
 * a file of `name: value` lines (what `curl -D` or a receiver's log writes; other lines are
 * skipped) or a JSON object; the body from a file, as received, byte for byte. Keys: a
 * `whsec_` secret (v1), public keys (v1a), or, with neither, the gateway's delivery keys
 * fetched from GET /v1/delivery-keys. Exit 0 valid, 1 not valid.
 */
export function registerVerifyWebhook(program: Command): void {
  program
    .command('verify-webhook')
    .description('check a delivery: valid, or why not (exit 0 valid, 1 not)')
    .requiredOption('--headers <file>', 'the delivery\'s headers: name: value lines, or a JSON object')
    .requiredOption('--body <file>', 'the body exactly as received')
    .option('--secret <whsec>', 'the webhook\'s whsec_ secret (scheme v1)')
    .option('--public-key <whpk...>', 'delivery public keys (scheme v1a); with neither option, fetched from the gateway')
    .option('--tolerance <seconds>', 'how far webhook-timestamp may be from this clock', (v) => Number(v), 300)
    .action(async (o: { headers: string; body: string; secret?: string; publicKey?: string[]; tolerance: number }, cmd: Command) => {
      const s = settingsOf(cmd)
      const headers = readHeaders(o.headers)
      const body = readFile(o.body)
      let publicKeys = o.publicKey
      if (o.secret === undefined && publicKeys === undefined) {
        publicKeys = ((await gatewayCall(s, 'GET', '/v1/delivery-keys', { anonymous: true })).data as { public_key: string }[]).map((k) => k.public_key)
      }
      try {
        const ok = verifyWebhook(headers, body, { ...(o.secret === undefined ? {} : { secret: o.secret }), ...(publicKeys === undefined ? {} : { publicKeys }), toleranceSeconds: o.tolerance })
        printResult(s, { valid: true, ...ok }, () => `valid: ${ok.id}, signed ${ok.scheme} at ${new Date(ok.timestamp * 1000).toISOString()}`)
      } catch (err) {
        if (!(err instanceof WebhookVerificationError)) throw err
        if (err.code === 'invalid_key') throw usageError(err.message)
        printResult(s, { valid: false, code: err.code, reason: err.message }, () => `not valid: ${err.code}: ${err.message}`)
        throw new CliError(EXIT.refused, '')
      }
    })
}

function readFile(path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (err) {
    throw usageError(`cannot read ${path}: ${(err as Error).message}`)
  }
}

function readHeaders(path: string): Record<string, string> {
  const text = readFile(path).toString('utf8')
  if (text.trimStart().startsWith('{')) {
    try {
      return JSON.parse(text) as Record<string, string>
    } catch (err) {
      throw usageError(`${path}: not JSON: ${(err as Error).message}`)
    }
  }
  const headers: Record<string, string> = {}
  for (const line of text.split(/\r?\n/)) {
    const m = /^([A-Za-z0-9-]+):\s*(.*?)\s*$/.exec(line)
    if (m !== null) headers[(m[1] as string).toLowerCase()] = m[2] as string
  }
  return headers
}
