import { readFileSync } from 'node:fs'
import type { Command } from 'commander'
import { ReceiptVerifyError, verifyReceipt, type ReceiptBundle, type VerifiedReceipt } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT, usageError } from '../exit-codes.js'
import { checkConsistent, gatewayKey, givenKeys, LogCheckFailure, openCheckpoint, readCheckpointFile } from '../log-trust.js'
import { fields, note, printResult } from '../output.js'
import { settingsOf } from '../settings.js'

/**
 * `sgw verify-receipt <bundle.json>`: checks a receipt's proof bundle (what
 * GET /v1/byo/receipts/:receipt_id/proof answers, its `data` or the whole answer) with the
 * SDK's verifyReceipt, against the log keys given or, without `--log-key`, the one the
 * gateway names at GET /v1/log/key. With `--checkpoint`, a checkpoint the caller saw
 * before (a file, or a monitor's state file), the bundle's checkpoint must also be
 * consistent with it. Exit 0 valid; 4 not valid, with the check that refused it.
 */
export function registerVerifyReceipt(program: Command): void {
  program
    .command('verify-receipt')
    .description('check a receipt\'s proof bundle: valid, or which check refused it (exit 0 valid, 4 not)')
    .argument('<bundle>', 'the bundle file (sgw receipts proof -o, or the proof route\'s answer)')
    .option('--log-key <key...>', 'the log\'s verifier key(s), from a source you trust (default: GET /v1/log/key)')
    .option('--checkpoint <file>', 'a checkpoint seen before (a signed note, or log monitor\'s state file): the bundle\'s must be consistent with it')
    .action(async (file: string, o: { logKey?: string[]; checkpoint?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const keys = givenKeys(o.logKey ?? [await gatewayKey(s)])
      const earlier = o.checkpoint === undefined ? undefined : readCheckpointFile(o.checkpoint)
      const text = readBundleText(file)
      try {
        const v = verifyReceipt(parseBundle(text), { logKey: keys.texts })
        const seen = earlier === undefined ? undefined : openCheckpoint(earlier, keys, `the checkpoint in ${o.checkpoint}`)
        if (seen !== undefined) await checkConsistent(s, seen, v.checkpoint)
        const result = summary(v, seen?.size)
        printResult(s, result, () => fields(result))
        if (!v.creatorSigned) note('a public bundle: inclusion and the log checked, not the creator\'s signature (its request and salts are for readers of the whole receipt)')
      } catch (err) {
        const failure = err instanceof ReceiptVerifyError || err instanceof LogCheckFailure ? { reason: err.reason, message: err.message } : undefined
        if (failure === undefined) throw err
        printResult(s, { valid: false, ...failure }, () => `not valid: ${failure.reason}: ${failure.message}`)
        throw new CliError(EXIT.notVerified, '')
      }
    })
}

function readBundleText(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (err) {
    throw usageError(`cannot read ${path}: ${(err as Error).message}`)
  }
}

/** The bundle: the file's JSON, or its `data` when it is the route's whole answer. Not JSON: `malformed_bundle` (a damaged file is refused like a tampered one). */
function parseBundle(text: string): ReceiptBundle {
  let value: any
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw new ReceiptVerifyError('malformed_bundle', `the bundle is not JSON: ${(err as Error).message}`)
  }
  return (value?.ok === true && typeof value.data === 'object' ? value.data : value) as ReceiptBundle
}

function summary(v: VerifiedReceipt, consistentWith: number | undefined): Record<string, unknown> {
  return {
    valid: true,
    receipt_id: v.leaf.receipt_id,
    source_id: v.leaf.source_id,
    received_at: v.leaf.received_at,
    leaf_index: v.leafIndex,
    origin: v.checkpoint.origin,
    tree_size: v.checkpoint.size,
    creator_signed: v.creatorSigned,
    ...(v.signal && { signal_id: v.signal.signal_id, key_id: v.signal.key_id }),
    ...(consistentWith !== undefined && { consistent_with_size: consistentWith }),
  }
}
