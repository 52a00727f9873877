import { closeSync, existsSync, openSync, readSync, statSync, truncateSync, writeSync } from 'node:fs'
import { nextDelayMs } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT } from './exit-codes.js'
import { describe } from './gateway-call.js'
import { ExportRowTracker, positionOf } from './export-rows.js'
import { progress } from './progress.js'
import { tokenOf, type Settings } from './settings.js'

export type ExportFormat = 'ndjson' | 'csv' | 'parquet'

/** Tries in a row that end without progress (no answer, a cut before a new row, 429, 5xx) before exit 3. */
const MAX_FAILURES = 5
const RETRY = { deadlineMs: 300_000, attemptTimeoutMs: 60_000, baseDelayMs: 500, factor: 2, maxDelayMs: 10_000 }

export interface ExportResult {
  readonly file: string
  readonly format: ExportFormat
  /** Data rows in the file (NDJSON and CSV; Parquet's are in its footer). */
  readonly rows: number | null
  readonly bytes: number
  /** Requests made: more than 1 after cuts. */
  readonly requests: number
  readonly resumed_from_file: boolean
}

/**
 * An export written to `file`, continued after a cut: NDJSON and CSV are cut back to their
 * last complete row and asked again with `after=` that row (the gateway sends the rows
 * that follow it, a CSV without its header, so the file reads as one export); a Parquet
 * file cannot be continued (its footer, written last, is what makes it readable), so it
 * starts over. With `resume`, a file an earlier run left behind is continued the same way.
 */
export async function exportToFile(s: Settings, path: string, query: URLSearchParams, format: ExportFormat, file: string, resume: boolean): Promise<ExportResult> {
  const resumedFromFile = resume && format !== 'parquet' && existsSync(file) && statSync(file).size > 0
  let tracker: ExportRowTracker | undefined
  if (format !== 'parquet') {
    tracker = new ExportRowTracker(format, { startsWithHeader: true })
    if (resumedFromFile) scanFile(file, tracker)
    // No data row yet: start the file again (a CSV's header comes with the first answer).
    if (tracker.lastRow === undefined) tracker = new ExportRowTracker(format, { startsWithHeader: true })
  }
  truncateSync0(file, tracker?.completeBytes ?? 0)
  const bar = progress('export', 0, format === 'parquet' ? 'bytes' : 'rows')
  let failures = 0
  let requests = 0
  let bytes = tracker?.completeBytes ?? 0
  try {
    for (;;) {
      const q = new URLSearchParams(query)
      q.set('format', format)
      if (tracker?.lastRow !== undefined) q.set('after', positionOf(format as 'ndjson' | 'csv', tracker.lastRow))
      requests++
      const before = tracker?.rows ?? 0
      let why: string
      let status: number | undefined
      let retryAfter: string | null = null
      const fd = openSync(file, 'a')
      try {
        const res = await fetch(`${s.url.replace(/\/+$/, '')}${path}?${q}`, { headers: { authorization: `Bearer ${tokenOf(s)}` } })
        status = res.status
        retryAfter = res.headers.get('retry-after')
        if (res.status !== 200) {
          const body = await res.json().catch(() => undefined)
          why = describe(res.status, body)
          if (res.status !== 429 && res.status < 500) throw new CliError(EXIT.refused, `export: ${why}`)
        } else {
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
            const b = Buffer.from(chunk)
            writeSync(fd, b)
            bytes += b.length
            if (tracker !== undefined) {
              const rows = tracker.rows
              tracker.add(b)
              bar.increment(tracker.rows - rows)
            } else bar.increment(b.length)
          }
          return { file, format, rows: tracker?.rows ?? null, bytes, requests, resumed_from_file: resumedFromFile }
        }
      } catch (err) {
        if (err instanceof CliError) throw err
        why = `the transfer was cut: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`
      } finally {
        closeSync(fd)
      }
      // Back to the last complete row (NDJSON, CSV) or to nothing (Parquet), then ask again.
      if (tracker === undefined) bar.increment(-bytes)
      bytes = tracker?.completeBytes ?? 0
      truncateSync0(file, bytes)
      failures = (tracker?.rows ?? 0) > before ? 1 : failures + 1
      if (failures > MAX_FAILURES) throw new CliError(EXIT.unreachable, `export: still failing after ${requests} requests; last: ${why}`)
      process.stderr.write(`export interrupted (${why}); ${tracker === undefined ? 'starting the Parquet file over' : `continuing after row ${tracker.rows}`}\n`)
      await new Promise((resolve) => setTimeout(resolve, nextDelayMs({ status, retryAfter }, failures - 1, RETRY, Date.now())))
    }
  } finally {
    bar.stop()
  }
}

/** Truncates (or creates) the file to `size` bytes. */
function truncateSync0(file: string, size: number): void {
  if (!existsSync(file)) closeSync(openSync(file, 'w'))
  truncateSync(file, size)
}

/** Feeds an existing file to the tracker, a block at a time. */
function scanFile(file: string, tracker: ExportRowTracker): void {
  const fd = openSync(file, 'r')
  const block = Buffer.alloc(1 << 20)
  try {
    for (;;) {
      const n = readSync(fd, block, 0, block.length, null)
      if (n === 0) return
      tracker.add(block.subarray(0, n))
    }
  } finally {
    closeSync(fd)
  }
}
