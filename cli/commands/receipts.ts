import type { Command } from 'commander'
import { usageError } from '../exit-codes.js'
import { enc, gatewayCall } from '../gateway-call.js'
import { isoTime, nonNegativeInt, positiveInt } from '../option-parsers.js'
import { printResult, table, fields } from '../output.js'
import { exportToFile, type ExportFormat } from '../receipt-export.js'
import { fetchProof, writeBundle } from '../receipt-proof.js'
import { settingsOf } from '../settings.js'

interface Filters {
  sourceId?: string
  agentId?: string
  from?: string
  to?: string
  outcome?: string
  severity?: string
  tokenAddress?: string
  status?: string
}

const COLUMNS = ['receipt_id', 'source_id', 'signal_id', 'severity', 'token', 'outcome', 'dispute_status', 'emitted_at']

function withFilters(cmd: Command): Command {
  return cmd
    .option('--source-id <id>', 'one source')
    .option('--agent-id <id>', 'one agent\'s sources')
    .option('--from <time>', 'emitted at or after (ISO 8601 UTC)', isoTime)
    .option('--to <time>', 'emitted before (ISO 8601 UTC)', isoTime)
    .option('--outcome <outcome>', 'pending, hit, miss or void')
    .option('--severity <tag>')
    .option('--token-address <address>', 'one token address (the API\'s token filter)')
    .option('--status <status>', 'dispute status: none, open, disputed or rejected')
}

/** The path and query of the filters: one source's route when only a source is named, else across sources. */
function target(f: Filters, suffix: string): { path: string; query: URLSearchParams } {
  const query = new URLSearchParams()
  const put = (k: string, v: string | undefined) => v !== undefined && query.set(k, v)
  put('from', f.from)
  put('to', f.to)
  put('outcome', f.outcome)
  put('severity', f.severity)
  put('token', f.tokenAddress)
  put('status', f.status)
  if (f.sourceId !== undefined && f.agentId === undefined) return { path: `/v1/byo/sources/${enc(f.sourceId)}/receipts${suffix}`, query }
  put('source_id', f.sourceId)
  put('agent_id', f.agentId)
  return { path: `/v1/byo/receipts${suffix}`, query }
}

/** `sgw receipts list|export|proof`: reading receipts (creator, renter or admin token; the public for public ones). */
export function registerReceipts(program: Command): void {
  const receipts = program.command('receipts').description('receipts: list with filters and a cursor, export to a file, or a receipt\'s proof bundle')
  withFilters(receipts.command('list').description('a page of receipts, newest first'))
    .option('--limit <n>', 'per page (1 to 1,000)', positiveInt)
    .option('--cursor <cursor>', 'the next page, from the previous one')
    .action(async (o: Filters & { limit?: number; cursor?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const { path, query } = target(o, '')
      if (o.limit !== undefined) query.set('limit', String(o.limit))
      if (o.cursor !== undefined) query.set('cursor', o.cursor)
      const q = query.toString()
      const page = await gatewayCall(s, 'GET', q === '' ? path : `${path}?${q}`, s.token === undefined ? { anonymous: true } : {})
      printResult(s, { data: page.data, next_cursor: page.next_cursor }, () => table(page.data, COLUMNS, page.next_cursor))
    })
  withFilters(receipts.command('export').description('every matching receipt to a file, continued after a cut (NDJSON, CSV) or started over (Parquet)'))
    .requiredOption('--out <file>', 'the file to write')
    .option('--format <format>', 'ndjson, csv or parquet', 'ndjson')
    .option('--resume', 'continue the NDJSON or CSV file an earlier run left in --out, after its last complete row')
    .action(async (o: Filters & { out: string; format: string; resume?: boolean }, cmd: Command) => {
      const s = settingsOf(cmd)
      if (!['ndjson', 'csv', 'parquet'].includes(o.format)) throw usageError('--format must be ndjson, csv or parquet')
      const { path, query } = target(o, '/export')
      const result = await exportToFile(s, path, query, o.format as ExportFormat, o.out, o.resume === true)
      printResult(s, result, () => fields({ ...result }))
    })
  receipts
    .command('proof')
    .description('a receipt\'s proof bundle, for sgw verify-receipt (waits while the receipt is not yet in a checkpoint)')
    .argument('<receipt_id>')
    .option('-o, --out <file>', 'write the bundle to this file (never over an existing one) rather than to stdout')
    .option('--wait <seconds>', 'how long to wait for the receipt to be in a checkpoint', nonNegativeInt, 10)
    .action(async (receiptId: string, o: { out?: string; wait: number }, cmd: Command) => {
      const s = settingsOf(cmd)
      const bundle = (await fetchProof(s, receiptId, o.wait)).data
      if (o.out === undefined) return void process.stdout.write(`${JSON.stringify(bundle, null, s.json ? undefined : 2)}\n`)
      writeBundle(o.out, bundle)
      const result = { file: o.out, receipt_id: receiptId, leaf_index: bundle.leaf_index, whole: bundle.request !== undefined }
      printResult(s, result, () => fields(result))
    })
}
