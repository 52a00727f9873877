import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, launchGateway } from '../../harness/gateway-launcher.js'
import type { ExportFormat } from '../../receipts/index.js'
import { closeHttp, httpExport, httpPages, type HttpTarget } from './http-reads.js'
import { ingestPhases } from './ingest-phases.js'
import { rssOf } from './pid-rss.js'
import { closeLagAgent } from './recorder-lag.js'
import type { Timing } from './stats.js'

/**
 * The phases through the real gateway (`dist/service/main.js`, harness/gateway-launcher.ts) started
 * on the seeded data folder, once this process has closed its own engine on it (chDB binds
 * one data folder per process, and two engines must never share one): page latency and
 * exports through HTTP as the admin, then signed ingest with the recorder on
 * (ingest-phases.ts). The gateway's RSS is read from /proc/<pid>/status every 100 ms.
 */

export interface GatewayPhaseOptions {
  readonly dataDir: string
  readonly maxMemoryMb: number
  readonly runs: number
  readonly crossRuns: number
  readonly source: (i: number) => string
  /** Time range of the exports in each format (the same rows as the store-level exports). */
  readonly exportRange: { readonly from: number; readonly to: number }
  /** Also export the whole table as NDJSON (every receipt, no filter). */
  readonly fullExport: boolean
  readonly ingest: boolean
  readonly halfPeakMs: number
}

/** How long the gateway sits idle after it is ready before its idle RSS is read. */
const IDLE_MS = 3_000
const iso = (ms: number) => new Date(ms).toISOString()
const round1 = (x: number) => Number(x.toFixed(1))

export async function gatewayPhases(o: GatewayPhaseOptions, print: (line?: string) => void): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  const t = performance.now()
  // A port picked here: at LOG_LEVEL warn the gateway writes no "ready" line to learn it
  // from, and a line per request would go into a pipe nobody reads fast.
  const gw = await launchGateway({
    dataDir: o.dataDir,
    port: await freePort(),
    env: { LOG_LEVEL: 'warn', INGEST_MAX_RATE_PER_S: '100000', INGEST_MAX_BURST: '100000', CLICKHOUSE_MAX_MEMORY_MB: String(o.maxMemoryMb) },
    outputLines: 50,
  })
  const target: HttpTarget = { url: gw.url, adminToken: gw.adminToken, pid: gw.pid }
  try {
    const readyS = (performance.now() - t) / 1000
    await sleep(IDLE_MS)
    out.gateway = { pid: gw.pid, ready_s: round1(readyS), rss_idle_mb: rssOf(gw.pid), memory_cap_mb: o.maxMemoryMb }
    print(`gateway pid ${gw.pid} on ${gw.url}, on the seeded folder: ready in ${readyS.toFixed(1)} s; RSS ${rssOf(gw.pid)} MB idle (CLICKHOUSE_MAX_MEMORY_MB ${o.maxMemoryMb})`)

    print('reads through HTTP (GET /v1/byo/receipts as the admin, source_id as a filter; request to parsed JSON):')
    const fmt = (name: string, x: Timing) => print(`  ${name}: p50 ${x.p50_ms} ms, p95 ${x.p95_ms} ms (max ${x.max_ms} ms, ${x.runs} runs)`)
    out.http_reads = await httpPages(target, { runs: o.runs, crossRuns: o.crossRuns, source: o.source }, fmt)

    print(`exports through HTTP (GET /v1/byo/receipts/export as the admin, from ${iso(o.exportRange.from)} to ${iso(o.exportRange.to)}; rows counted by this client; gateway RSS every 100 ms):`)
    const exports: Record<string, unknown> = {}
    const line = (name: string, e: Awaited<ReturnType<typeof httpExport>>) =>
      print(`  ${name}: ${e.rows.toLocaleString()} rows in ${e.s} s = ${e.rows_per_s.toLocaleString()} rows/s, ${e.mb} MB; gateway RSS start ${e.gateway_rss_mb.start_mb}, peak ${e.gateway_rss_mb.peak_mb}, end ${e.gateway_rss_mb.end_mb} MB (VmHWM ${e.gateway_rss_mb.hwm_mb})`)
    for (const format of ['ndjson', 'csv', 'parquet'] as ExportFormat[]) {
      const { aborted: _, ...e } = await httpExport(target, format, { from: iso(o.exportRange.from), to: iso(o.exportRange.to) })
      // A stalled export has no rate: its figures would be of a partial file.
      exports[format] = e.stalled === undefined ? e : { rows_per_s: null, reason: `not measured: stalled: ${e.stalled}`, partial: e }
      line(format, { ...e, aborted: false })
      if (e.stalled !== undefined) print(`  STALLED ${format} export: ${e.stalled}; cut by this client`)
    }
    if (o.fullExport) {
      const { aborted: _, ...e } = await httpExport(target, 'ndjson', {})
      exports.ndjson_whole_table = e.stalled === undefined ? e : { rows_per_s: null, reason: `not measured: stalled: ${e.stalled}`, partial: e }
      line('ndjson, the whole table (no filter)', { ...e, aborted: false })
      if (e.stalled !== undefined) print(`  STALLED whole-table export: ${e.stalled}; cut by this client`)
    }
    out.http_exports = exports

    if (o.ingest) {
      try {
        out.ingest = await ingestPhases(gw, { halfPeakMs: o.halfPeakMs }, print)
      } catch (err) {
        const reason = `not measured: the ingest phases failed: ${err instanceof Error ? err.message : String(err)}`
        print(reason)
        out.ingest = null
        out.ingest_reason = reason
      }
    } else {
      out.ingest = null
      out.ingest_reason = 'not measured: --no-ingest'
    }
    out.gateway_rss_end_mb = rssOf(gw.pid)
  } catch (err) {
    if (gw.output.length > 0) print(`gateway output (last ${gw.output.length} lines):\n${gw.output.join('\n')}`)
    throw err
  } finally {
    await closeHttp()
    await closeLagAgent()
    print(`gateway stopped: ${await gw.stop()}`)
  }
  return out
}
