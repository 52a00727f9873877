import { readFileSync } from 'node:fs'
import { NoteError, parseVerifierKey, verifyCheckpoint, verifyConsistency, type Checkpoint, type NoteVerifierKey } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT, usageError } from './exit-codes.js'
import { gatewayCall } from './gateway-call.js'
import type { Settings } from './settings.js'

/**
 * What `verify-receipt` and `log monitor` trust and how they compare checkpoints: the log's
 * verifier keys (given, remembered, or named by the gateway), checkpoints read from files,
 * and consistency between two checkpoints with a proof from GET /v1/log/consistency.
 */

/** A check of the log or a bundle that failed: exit 4, with the check's name as its reason. */
export class LogCheckFailure extends Error {
  readonly reason: string
  constructor(reason: string, message: string) {
    super(message)
    this.reason = reason
  }
}

export interface TrustedKeys {
  /** The verifier keys as written, to remember them. */
  readonly texts: string[]
  readonly parsed: NoteVerifierKey[]
}

/** Keys given on the command line: one that is not a verifier key is a usage error. */
export function givenKeys(texts: readonly string[]): TrustedKeys {
  const parsed = texts.map((k) => {
    try {
      return parseVerifierKey(k)
    } catch (err) {
      throw usageError(`--log-key ${k}: ${(err as Error).message}`)
    }
  })
  return { texts: [...texts], parsed }
}

/** The key the gateway names at GET /v1/log/key (trust on first use: the caller says so). */
export async function gatewayKey(s: Settings): Promise<string> {
  const text = String((await gatewayCall(s, 'GET', '/v1/log/key', { anonymous: true, text: true })).data).trim()
  try {
    parseVerifierKey(text)
  } catch (err) {
    throw new CliError(EXIT.notVerified, `GET /v1/log/key answered no verifier key: ${(err as Error).message}`)
  }
  return text
}

export type SignedCheckpoint = Checkpoint & { readonly note: string }

/** Opens a checkpoint with the trusted keys; `what` names it in the failure. */
export function openCheckpoint(note: string, keys: TrustedKeys, what: string): SignedCheckpoint {
  try {
    return verifyCheckpoint(note, keys.parsed)
  } catch (err) {
    throw new LogCheckFailure('checkpoint_signature', `${what}: ${err instanceof NoteError ? err.message : String(err)}`)
  }
}

/**
 * A checkpoint from a file: the signed note itself, or a monitor's state file (JSON with
 * `checkpoint`). A file that cannot be read, or holds neither, is a usage error.
 */
export function readCheckpointFile(path: string): string {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw usageError(`cannot read ${path}: ${(err as Error).message}`)
  }
  if (!text.trimStart().startsWith('{')) return text
  try {
    const note = (JSON.parse(text) as { checkpoint?: unknown }).checkpoint
    if (typeof note === 'string') return note
  } catch {
    // Reported below.
  }
  throw usageError(`${path}: neither a signed checkpoint nor a monitor's state file`)
}

/**
 * Checks that `a` and `b` are checkpoints of one log, the smaller a prefix of the larger,
 * with the consistency proof the gateway gives between their sizes. Equal sizes need
 * equal roots (no proof asked). A failure is a fork (or two logs): LogCheckFailure `consistency`.
 */
export async function checkConsistent(s: Settings, a: Checkpoint, b: Checkpoint): Promise<void> {
  if (a.origin !== b.origin) throw new LogCheckFailure('consistency', `the checkpoints are of two logs (${a.origin}, ${b.origin})`)
  const [small, large] = a.size <= b.size ? [a, b] : [b, a]
  let proof: Uint8Array[] = []
  if (small.size !== large.size && small.size !== 0) {
    const answer = await gatewayCall(s, 'GET', `/v1/log/consistency?from=${small.size}&to=${large.size}`, s.token === undefined ? { anonymous: true } : {})
    const hashes: unknown = answer.data?.proof
    if (!Array.isArray(hashes) || !hashes.every((h) => typeof h === 'string')) throw new LogCheckFailure('consistency', 'GET /v1/log/consistency answered no list of hashes')
    proof = hashes.map((h: string) => new Uint8Array(Buffer.from(h, 'base64')))
  }
  if (!verifyConsistency(small.size, large.size, small.rootHash, large.rootHash, proof)) {
    throw new LogCheckFailure('consistency', small.size === large.size
      ? `two checkpoints of size ${small.size} with different roots: the log forked`
      : `the checkpoint of size ${small.size} is not a prefix of that of size ${large.size}: the log forked`)
  }
}
