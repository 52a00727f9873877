import type { Command } from 'commander'
import { CliError, EXIT } from '../exit-codes.js'
import { ForkReport, monitorRound, readState, writeState, type Round } from '../log-monitor.js'
import { gatewayKey, givenKeys, LogCheckFailure, openCheckpoint, type SignedCheckpoint, type TrustedKeys } from '../log-trust.js'
import { positiveInt } from '../option-parsers.js'
import { note, printResult } from '../output.js'
import { settingsOf, type Settings } from '../settings.js'

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64')

/**
 * `sgw log monitor`: follows the receipt log's checkpoints and checks each is consistent
 * with the last one verified; a fork (or a checkpoint not signed by a trusted key) ends it
 * with exit 4 and both checkpoints printed, the evidence to raise with the operator.
 */
export function registerLog(program: Command): void {
  const log = program.command('log').description('the receipt log: follow its checkpoints')
  log
    .command('monitor')
    .description('follow the checkpoints, each checked against the last one verified; a fork ends it with exit 4')
    .option('--interval <seconds>', 'between two looks', positiveInt, 60)
    .option('--state <file>', 'remembers the last verified checkpoint and the trusted keys, so a restart continues')
    .option('--once', 'one look, then exit (0 consistent, 4 not)')
    .option('--log-key <key...>', 'the log\'s verifier key(s), from a source you trust (default: those in --state, else GET /v1/log/key)')
    .action(async (o: { interval: number; state?: string; once?: boolean; logKey?: string[] }, cmd: Command) => {
      const s = settingsOf(cmd)
      const state = o.state === undefined ? undefined : readState(o.state)
      let keys: TrustedKeys
      if (o.logKey !== undefined) keys = givenKeys(o.logKey)
      else if (state !== undefined) keys = givenKeys(state.log_keys)
      else {
        keys = givenKeys([await gatewayKey(s)])
        note(`trusting the log key the gateway names: ${keys.texts[0]} (give --log-key to check against one from elsewhere)`)
      }
      let last: SignedCheckpoint | undefined
      try {
        last = state === undefined ? undefined : openCheckpoint(state.checkpoint, keys, `the checkpoint in ${o.state}`)
      } catch (err) {
        if (!(err instanceof LogCheckFailure)) throw err
        printResult(s, { consistent: false, reason: err.reason, message: err.message }, () => `not valid: ${err.reason}: ${err.message}`)
        throw new CliError(EXIT.notVerified, '')
      }
      for (;;) {
        let round: Round
        try {
          round = await monitorRound(s, keys, last, o.logKey === undefined)
        } catch (err) {
          if (err instanceof ForkReport || err instanceof LogCheckFailure) return reportFailure(s, err)
          if (o.once === true || !(err instanceof CliError) || err.exitCode !== EXIT.unreachable) throw err
          note(`${err.message}; looking again in ${o.interval} s`)
          await new Promise((resolve) => setTimeout(resolve, o.interval * 1000))
          continue
        }
        if (round.learnedKey !== undefined) {
          keys = givenKeys([...keys.texts, round.learnedKey])
          note(`trusting the log key ${round.learnedKey} too: the latest checkpoint is signed by it and by a key already trusted`)
        }
        if (o.once === true || round.outcome !== 'unchanged') printRound(s, round, last)
        if (round.outcome === 'older') note(`the gateway serves an older checkpoint (size ${round.latest.size}), consistent with the one of size ${last?.size} kept`)
        last = round.remembered
        if (o.state !== undefined) writeState(o.state, { checkpoint: last.note, log_keys: keys.texts, verified_at: new Date().toISOString() })
        if (o.once === true) return
        await new Promise((resolve) => setTimeout(resolve, o.interval * 1000))
      }
    })
}

function printRound(s: Settings, round: Round, before: SignedCheckpoint | undefined): void {
  const cp = round.latest
  const value = { origin: cp.origin, size: cp.size, root: b64(cp.rootHash), outcome: round.outcome, ...(before !== undefined && { previous_size: before.size }) }
  printResult(s, value, () => `checkpoint ${cp.size} ${value.root}: ${round.outcome === 'first' ? 'the first seen' : `${round.outcome}, consistent with the checkpoint of size ${before?.size}`}`)
}

function reportFailure(s: Settings, err: LogCheckFailure): never {
  if (err instanceof ForkReport) {
    printResult(s, { consistent: false, reason: err.reason, message: err.message, remembered: err.remembered, latest: err.latest }, () =>
      [`not consistent: ${err.reason}: ${err.message}`, '', 'the checkpoint verified before:', err.remembered, 'the checkpoint the gateway serves now:', err.latest].join('\n'))
  } else printResult(s, { consistent: false, reason: err.reason, message: err.message }, () => `not valid: ${err.reason}: ${err.message}`)
  throw new CliError(EXIT.notVerified, '')
}
