import { createInterface } from 'node:readline'
import type { Command } from 'commander'
import { PushError, SourceClient } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT, usageError } from '../exit-codes.js'
import { readKeyFile } from '../key-file.js'
import { jsonObject, positiveInt } from '../option-parsers.js'
import { printResult, table } from '../output.js'
import { progress } from '../progress.js'
import { settingsOf } from '../settings.js'

interface PushSummary {
  total: number
  accepted: number
  deduplicated: number
  test: number
  refused: number
  gave_up: number
  /** Final answers by HTTP status (`none` when the last attempt got no answer). */
  by_status: Record<string, number>
  /** Refusals and give-ups by the gateway's error code (`invalid_json` for a line that is not a JSON object). */
  by_code: Record<string, number>
}

/**
 * `sgw push`: one signal (--signal), or one per NDJSON line on stdin, each pushed with the
 * SDK's SourceClient (signed per attempt, retried on 429, 5xx and no answer until its
 * deadline), several at once. The summary counts the final answers by status and code.
 */
export function registerPush(program: Command): void {
  program
    .command('push')
    .description('push signals: --signal <json>, or NDJSON (one signal a line) from stdin')
    .requiredOption('--source-id <id>')
    .requiredOption('--key-id <id>', 'the key that signs (active, grace, or pending for a test signal)')
    .requiredOption('--key <file>', 'its private key file')
    .option('--signal <json>', 'one signal, inline JSON or @file; ts defaults to now, source_id to --source-id', jsonObject)
    .option('--concurrency <n>', 'pushes in flight at once from stdin', positiveInt, 8)
    .option('--deadline <ms>', 'give one signal up this long after its first attempt (at most 300000)', positiveInt, 60_000)
    .action(async (o: { sourceId: string; keyId: string; key: string; signal?: Record<string, unknown>; concurrency: number; deadline: number }, cmd: Command) => {
      const s = settingsOf(cmd)
      if (o.deadline > 300_000) throw usageError('--deadline is at most 300000 ms: the gateway takes a signal only within 300 s of its timestamp')
      const key = await readKeyFile(o.key)
      const client = new SourceClient({ gatewayUrl: s.url, sourceId: o.sourceId, keyId: o.keyId, key, retry: { deadlineMs: o.deadline } })
      const summary: PushSummary = { total: 0, accepted: 0, deduplicated: 0, test: 0, refused: 0, gave_up: 0, by_status: {}, by_code: {} }
      const bar = progress('push', 0, 'signals')
      const pushOne = async (signal: Record<string, unknown> | undefined) => {
        summary.total++
        if (signal === undefined) return count(summary, 'none', 'invalid_json', 'refused')
        try {
          const a = await client.push({ ts: new Date().toISOString(), ...signal })
          summary.accepted++
          if (a.deduplicated) summary.deduplicated++
          if (a.test) summary.test++
          summary.by_status['202'] = (summary.by_status['202'] ?? 0) + 1
          if (o.signal !== undefined && !s.json) process.stdout.write(`${JSON.stringify(a)}\n`)
        } catch (err) {
          if (!(err instanceof PushError)) throw err
          count(summary, String(err.status ?? 'none'), err.errorCode ?? (err.status === undefined ? 'no_answer' : String(err.status)), err.code === 'push_refused' ? 'refused' : 'gave_up')
          if (o.signal !== undefined) process.stderr.write(`${err.message}\n`)
        } finally {
          bar.increment()
        }
      }
      if (o.signal !== undefined) await pushOne(o.signal)
      else await fromStdin(o.concurrency, pushOne, bar)
      bar.stop()
      printResult(s, summary, () => human(summary))
      if (summary.gave_up > 0) throw new CliError(EXIT.unreachable, `${summary.gave_up} of ${summary.total} signals gave up: the gateway could not be reached or kept failing`)
      if (summary.refused > 0) throw new CliError(EXIT.refused, `${summary.refused} of ${summary.total} signals were refused`)
    })
}

function count(summary: PushSummary, status: string, code: string, kind: 'refused' | 'gave_up'): void {
  summary[kind]++
  summary.by_status[status] = (summary.by_status[status] ?? 0) + 1
  summary.by_code[code] = (summary.by_code[code] ?? 0) + 1
}

/** Lines of stdin as they come, at most `concurrency` pushes in flight: memory holds that many lines, however long the input. */
async function fromStdin(concurrency: number, pushOne: (signal: Record<string, unknown> | undefined) => Promise<void>, bar: { total(n: number): void }): Promise<void> {
  const inFlight = new Set<Promise<void>>()
  let lines = 0
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === '') continue
    bar.total(++lines)
    const p = pushOne(objectOf(line)).finally(() => inFlight.delete(p))
    inFlight.add(p)
    if (inFlight.size >= concurrency) await Promise.race(inFlight)
  }
  await Promise.all(inFlight)
}

function human(s: PushSummary): string {
  const rows = [
    ...Object.entries(s.by_status).map(([status, n]) => ({ by: 'status', value: status, signals: n })),
    ...Object.entries(s.by_code).map(([code, n]) => ({ by: 'code', value: code, signals: n })),
  ]
  return `${s.total} pushed: ${s.accepted} accepted (${s.deduplicated} deduplicated, ${s.test} test), ${s.refused} refused, ${s.gave_up} gave up\n${table(rows, ['by', 'value', 'signals'])}`
}

/** A line's JSON object, or undefined for anything else (never read as `@file`: input is data, not options). */
function objectOf(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line)
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}
