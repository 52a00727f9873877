import { randomBytes } from 'node:crypto'
import { parquetMetadata, parquetReadObjects } from 'hyparquet'
import t from 'tap'
import { provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js'
import { RawHttpReader } from '../helpers/raw-http-reader.js'
import { receiptOf, seedReceipts } from '../helpers/receipt-gateway.js'

// Exports to readers slower than the gateway, over plain sockets so the test sets the pace
// and sees the chunked framing as sent. The exports must be larger than what the two
// sockets' kernel buffers hold (a few MB on loopback), or the gateway never has to wait for
// its reader: 40,000 receipts with 200 characters of random text each make a Parquet file
// of about 10 MB and an NDJSON export of about 22 MB.
const IDLE_MS = 3000
const ROWS = 40_000
let gw = await startTestGateway(t)
const src = await provision(gw)
const inputs = Array.from({ length: ROWS }, (_, i) => receiptOf(src, i, (i + 1) * 10, { note: randomBytes(150).toString('base64') }))
// One export per caller at a time: an export that never ended would hold the only slot.
gw = await seedReceipts(t, gw, inputs, { env: { EXPORT_IDLE_TIMEOUT_MS: String(IDLE_MS), EXPORT_CONCURRENT_PER_PRINCIPAL: '1' } })
const auth = { authorization: `Bearer ${src.creatorToken}` }
const exportPath = (format: string) => `/v1/byo/sources/${src.sourceId}/receipts/export?format=${format}`

async function idleCuts(): Promise<number> {
  const page = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })).text()
  return sampleValue(parsePrometheusText(page), 'sgw_export_failures_total', { reason: 'idle' }) as number
}

t.test('a Parquet export to a reader that pauses, then reads slower than the gateway writes, makes progress whenever it reads and arrives whole', async (t) => {
  const reader = await RawHttpReader.get(gw.port, exportPath('parquet'), auth)
  // Nothing read from the first bytes on (the engine writes the whole file first) for half
  // a second, so the sockets fill and the gateway waits for its reader; then a read every
  // 10 ms: each time the reader takes some, the socket has room for less than the
  // gateway's next read of the file.
  reader.socket.once('data', () => reader.socket.pause())
  const firstByte = Date.now() + 60_000
  while (reader.socket.bytesRead === 0 && Date.now() < firstByte) await new Promise((resolve) => setTimeout(resolve, 10))
  await new Promise((resolve) => setTimeout(resolve, 500))
  reader.trickle(10)
  // Well under the idle timeout: a gateway that waits for an onWritable that never comes
  // sends nothing more while the reader keeps reading.
  const end = await reader.ended(IDLE_MS - 1000)
  reader.socket.destroy()
  t.equal(end, 'complete', `the export ${end} after ${reader.bodyBytes} body bytes${reader.malformed ? `: ${reader.malformed}` : ''}`)
  t.equal(reader.status, 200)
  if (end !== 'complete') return
  const file = reader.body()
  const bytes = file.buffer.slice(file.byteOffset, file.byteOffset + file.length) as ArrayBuffer
  t.equal(Number(parquetMetadata(bytes).num_rows), ROWS)
  const rows = (await parquetReadObjects({ file: bytes, columns: ['receipt_id'] })) as { receipt_id: string }[]
  t.equal(new Set(rows.map((r) => r.receipt_id)).size, ROWS, 'every receipt once')
  t.ok(file.length > 8e6, `the file (${(file.length / 1e6).toFixed(1)} MB) is larger than the sockets hold`)
})

t.test('a reader that stops reading is cut after EXPORT_IDLE_TIMEOUT_MS: an incomplete chunked body, a log line, sgw_export_failures_total{reason="idle"}; its slot is free again', async (t) => {
  const before = await idleCuts()
  const asked = Date.now()
  const reader = await RawHttpReader.get(gw.port, exportPath('ndjson'), auth)
  reader.socket.pause()
  let cutAfter = 0
  while (Date.now() - asked < IDLE_MS + 20_000) {
    if ((await idleCuts()) > before) {
      cutAfter = Date.now() - asked
      break
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  t.ok(cutAfter >= IDLE_MS, cutAfter === 0 ? 'never cut' : `cut ${cutAfter} ms after the request, not before the idle timeout (${IDLE_MS} ms)`)
  // The log line reaches this process through the gateway's stdout, after the metric may
  // already count the cut: wait for it rather than read it at once.
  const logged = async () => gw.output.some((line) => line.includes('receipt export cut'))
  for (const until = Date.now() + 10_000; !(await logged()) && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 100))
  t.ok(await logged(), 'a log line says the export was cut')
  // What the kernel buffers held still arrives; then the connection closes before the final chunk.
  reader.socket.resume()
  const end = await reader.ended(10_000)
  t.equal(end, 'closed')
  t.equal(reader.complete, false, 'no final chunk: the client sees the transfer was cut')
  t.equal(reader.malformed, undefined, 'the chunks that arrived are whole')
  t.ok(reader.bodyBytes > 0 && reader.bodyBytes < 20e6, `${reader.bodyBytes} body bytes of the export arrived`)
  // The cut export gave back the caller's only slot.
  const again = await fetch(`${gw.url}${exportPath('ndjson')}&severity=critical`, { headers: auth })
  t.equal(again.status, 200)
  t.equal((await again.text()).trimEnd().split('\n').length, inputs.filter((i) => i.severity === 'critical').length)
})
