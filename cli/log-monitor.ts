import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { openNote, parseVerifierKey } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT, usageError } from './exit-codes.js'
import { gatewayCall } from './gateway-call.js'
import { checkConsistent, gatewayKey, LogCheckFailure, openCheckpoint, type SignedCheckpoint, type TrustedKeys } from './log-trust.js'
import type { Settings } from './settings.js'

/**
 * `sgw log monitor`'s rounds: fetch the latest checkpoint, check its signature and that it
 * is consistent with the last one verified, and remember it. The state file holds the
 * last verified checkpoint and the keys trusted, so a restart continues where it stopped
 * (and `sgw verify-receipt --checkpoint <state file>` can check a bundle against it).
 */

export interface MonitorState {
  /** The last checkpoint verified, as the signed note served. */
  readonly checkpoint: string
  readonly log_keys: readonly string[]
  readonly verified_at: string
}

/** The state left by an earlier run; undefined when the file does not exist yet. */
export function readState(path: string): MonitorState | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw usageError(`cannot read ${path}: ${(err as Error).message}`)
  }
  try {
    const state = JSON.parse(text) as MonitorState
    if (typeof state.checkpoint === 'string' && Array.isArray(state.log_keys) && state.log_keys.every((k) => typeof k === 'string')) return state
  } catch {
    // Reported below.
  }
  throw usageError(`${path}: not a log monitor state file (JSON with checkpoint and log_keys)`)
}

/** Written to a side file and renamed over the state, so a crash mid-write leaves the old state whole. */
export function writeState(path: string, state: MonitorState): void {
  const side = `${path}.${process.pid}.tmp`
  writeFileSync(side, `${JSON.stringify(state, null, 2)}\n`)
  renameSync(side, path)
}

export type RoundOutcome =
  /** No checkpoint was remembered: this one is the first. */
  | 'first'
  | 'unchanged'
  /** Larger, and the remembered one is its prefix. */
  | 'grew'
  /** Smaller than the remembered one, and its prefix (an older checkpoint served again): the remembered one is kept. */
  | 'older'

export interface Round {
  readonly outcome: RoundOutcome
  readonly latest: SignedCheckpoint
  /** The checkpoint to remember from now on. */
  readonly remembered: SignedCheckpoint
  /** A key the gateway now names that the latest checkpoint is signed by next to a trusted one (a rotation's overlap). */
  readonly learnedKey?: string
}

/** A fork, or a checkpoint not signed by a trusted key: the checks' failure with both checkpoints, to print. */
export class ForkReport extends LogCheckFailure {
  readonly remembered: string
  readonly latest: string
  constructor(failure: LogCheckFailure, remembered: string, latest: string) {
    super(failure.reason, failure.message)
    this.remembered = remembered
    this.latest = latest
  }
}

/**
 * One round. `learnKeys`: the keys were not given on the command line, so a key the gateway
 * names is trusted from the moment a checkpoint signed by an already trusted key is also
 * signed by it; a monitor thus follows a log key rotation through its overlap without
 * ever trusting a key on the gateway's word alone (past its first start).
 */
export async function monitorRound(s: Settings, keys: TrustedKeys, last: SignedCheckpoint | undefined, learnKeys: boolean): Promise<Round> {
  const note = String((await gatewayCall(s, 'GET', '/v1/log/checkpoint', { anonymous: true, text: true })).data)
  let latest: SignedCheckpoint
  try {
    latest = openCheckpoint(note, keys, 'the latest checkpoint')
    if (last !== undefined) await checkConsistent(s, last, latest).catch((err: unknown) => {
      // A log serves no proof past its latest checkpoint: one that went back cannot show it is the same log.
      if (latest.size < last.size && err instanceof CliError && err.exitCode === EXIT.refused) {
        throw new LogCheckFailure('consistency', `the gateway serves a checkpoint of size ${latest.size}, smaller than the ${last.size} seen before, and proves no consistency between them: ${err.message}`)
      }
      throw err
    })
  } catch (err) {
    if (err instanceof LogCheckFailure && last !== undefined) throw new ForkReport(err, last.note, note)
    throw err
  }
  const learnedKey = learnKeys ? await coSignedKey(s, keys, note) : undefined
  if (last === undefined) return { outcome: 'first', latest, remembered: latest, ...(learnedKey && { learnedKey }) }
  const outcome: RoundOutcome = latest.size > last.size ? 'grew' : latest.size === last.size ? 'unchanged' : 'older'
  return { outcome, latest, remembered: outcome === 'older' ? last : latest, ...(learnedKey && { learnedKey }) }
}

async function coSignedKey(s: Settings, keys: TrustedKeys, note: string): Promise<string | undefined> {
  const current = await gatewayKey(s)
  if (keys.texts.includes(current)) return undefined
  try {
    openNote(note, [parseVerifierKey(current)])
    return current
  } catch {
    return undefined
  }
}
