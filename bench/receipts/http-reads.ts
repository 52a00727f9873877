import { parquetMetadata } from 'hyparquet'
import { Agent, request } from 'undici'
import type { ExportFormat } from '../../receipts/index.js'
import { pidRssWindow, type RssWindow } from './pid-rss.js'
import { seededToken } from './seed.js'
import { timed, type Timing } from './stats.js'

/**
 * The read phases through the gateway's HTTP API, as the admin: the seeded receipts belong
 * to synthetic source ids the registry does not know, so the per-source endpoints answer
 * 404 for them (as they would for any caller without entitlement); the admin reads every
 * receipt through the cross-source endpoints, where `source_id` is a filter. A page is
 * timed from the request to the last byte of its JSON, parsed. An export's rows are counted
 * here, as the client sees them: NDJSON one line per row, CSV its lines less the header
 * (the seeded receipts hold no quoted newline), Parquet the row count of the footer of the
 * whole downloaded file, read with hyparquet.
 */

export interface HttpTarget {
  readonly url: string
  readonly adminToken: string
  readonly pid: number
}

/** An export that sends no byte for this long is cut and reported as stalled, not waited on forever. */
const STALL_MS = 30_000

export interface HttpExport {
  readonly rows: number
  readonly s: number
  readonly rows_per_s: number
  readonly mb: number
  readonly gateway_rss_mb: RssWindow
  /** Set when the gateway stopped sending for STALL_MS: the figures above are then of a partial file. */
  readonly stalled?: string
}

const agent = new Agent({ connections: 4, keepAliveTimeout: 60_000, bodyTimeout: 0, headersTimeout: 600_000 })

async function getJson(t: HttpTarget, path: string): Promise<{ data: unknown[]; next_cursor: string | null }> {
  const res = await request(`${t.url}${path}`, { dispatcher: agent, headers: { authorization: `Bearer ${t.adminToken}` } })
  const body = (await res.body.json()) as { ok: boolean; data: unknown[]; next_cursor: string | null; error?: unknown }
  if (res.statusCode !== 200) throw new Error(`GET ${path}: ${res.statusCode} ${JSON.stringify(body)}`)
  return body
}

const list = (params: Record<string, string>) => `/v1/byo/receipts?${new URLSearchParams({ limit: '100', ...params })}`

/** Page latency through HTTP: the same queries as the store-level reads. */
export async function httpPages(t: HttpTarget, o: { runs: number; crossRuns: number; source: (i: number) => string }, log: (name: string, t: Timing) => void): Promise<Record<string, Timing>> {
  const out: Record<string, Timing> = {}
  out.first_page = await timed(o.runs, (i) => getJson(t, list({ source_id: o.source(i) })))
  log('first page of one source (100)', out.first_page)
  out.filtered_first_page = await timed(o.runs, (i) => getJson(t, list({ source_id: o.source(i), severity: 'high', outcome: 'hit' })))
  log('filtered first page: one source, severity=high, outcome=hit', out.filtered_first_page)
  const cursors: string[] = []
  for (let s = 0; s < 5; s++) {
    let cursor: string | null = null
    for (let p = 1; p < 50; p++) cursor = (await getJson(t, list(cursor === null ? { source_id: o.source(s) } : { source_id: o.source(s), cursor }))).next_cursor
    if (cursor === null) throw new Error('a source has fewer than 50 pages: seed more rows')
    cursors.push(cursor)
  }
  out.deep_page = await timed(o.runs, (i) => getJson(t, list({ source_id: o.source(i % 5), cursor: cursors[i % 5]! })))
  log('page 50 of a walk (cursor)', out.deep_page)
  out.cross_source_severity = await timed(o.crossRuns, () => getJson(t, list({ severity: 'critical' })), 1)
  log('every source, severity=critical', out.cross_source_severity)
  out.cross_source_token = await timed(o.crossRuns, (i) => getJson(t, list({ token: seededToken(i * 37) })), 1)
  log('every source, one token', out.cross_source_token)
  out.cross_source_agent = await timed(o.crossRuns, (i) => getJson(t, list({ agent_id: `agent-${i % 97}` })), 1)
  log('every source, one agent_id', out.cross_source_agent)
  return out
}

/**
 * One export through `GET /v1/byo/receipts/export`, read as fast as this client takes it,
 * the gateway's RSS sampled meanwhile. `signal` cuts it short (then the rows so far count).
 */
export async function httpExport(t: HttpTarget, format: ExportFormat, filter: Record<string, string>, signal?: AbortSignal): Promise<HttpExport & { aborted: boolean }> {
  const rss = pidRssWindow(t.pid)
  const started = performance.now()
  let bytes = 0
  let lines = 0
  let aborted = false
  let stalled: string | undefined
  const parquet: Buffer[] = []
  const stall = new AbortController()
  let lastByte = performance.now()
  const watchdog = setInterval(() => {
    if (performance.now() - lastByte < STALL_MS) return
    stalled = `the gateway sent nothing for ${STALL_MS / 1000} s after ${bytes.toLocaleString()} bytes`
    stall.abort()
  }, 1000)
  try {
    const res = await request(`${t.url}/v1/byo/receipts/export?${new URLSearchParams({ ...filter, format })}`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${t.adminToken}` },
      signal: signal === undefined ? stall.signal : AbortSignal.any([signal, stall.signal]),
    })
    if (res.statusCode !== 200) throw new Error(`export ${format}: ${res.statusCode} ${await res.body.text()}`)
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      lastByte = performance.now()
      bytes += chunk.length
      if (format === 'parquet') parquet.push(chunk)
      else for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++
    }
  } catch (err) {
    if (signal?.aborted !== true && stalled === undefined) throw err
    aborted = signal?.aborted === true
  } finally {
    clearInterval(watchdog)
  }
  const s = (performance.now() - started) / 1000
  const gatewayRss = rss.stop()
  let rows = format === 'ndjson' ? lines : format === 'csv' ? Math.max(0, lines - 1) : 0
  if (format === 'parquet' && !aborted && stalled === undefined) {
    const file = Buffer.concat(parquet)
    rows = Number(parquetMetadata(file.buffer.slice(file.byteOffset, file.byteOffset + file.length) as ArrayBuffer).num_rows)
  }
  return { rows, s: Number(s.toFixed(2)), rows_per_s: Math.round(rows / s), mb: Math.round(bytes / 1e6), gateway_rss_mb: gatewayRss, aborted, ...(stalled !== undefined && { stalled }) }
}

export async function closeHttp(): Promise<void> {
  await agent.close()
}
