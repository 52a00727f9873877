import { join } from 'node:path'
import t from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { decodeSignalRecord, openJournal } from '../../pipeline/index.js'
import { ClickHouseReceiptStore } from '../../receipts/index.js'
import { payload, provision, push, type Provisioned } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { recorderRows, until } from '../helpers/recorder.js'

// The built gateway as a child process, its recorder writing to its own chDB folder under
// DATA_DIR. Small batches and a short flush keep the recorder mid-batch most of the time
// while signals flow, so each kill -9 lands inside a batch's read, write or acknowledgement.
// JOURNAL_FSYNC=never: a killed process loses nothing the kernel holds, and the pushes go faster.
const env = { RECORDER_BATCH: '150', RECORDER_FLUSH_MS: '20', JOURNAL_FSYNC: 'never' }

async function readyz(gw: LaunchedGateway): Promise<any> {
  return (await (await fetch(`${gw.url}/readyz`)).json()) as any
}

/** Pushes from 16 connections at once until `stop` resolves; the 202'd signal ids go into `accepted`. */
async function pushUntil(gw: LaunchedGateway, src: Provisioned, accepted: Set<string>, stop: Promise<void>): Promise<void> {
  let stopped = false
  void stop.then(() => (stopped = true))
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (!stopped) {
        const p = payload(src.sourceId)
        try {
          const res = await push(gw, src.sign(p))
          if (res.status === 202) accepted.add(p.signal_id as string)
        } catch {
          return // the connection the kill cut
        }
      }
    }),
  )
}

t.test('kill -9 in the middle of recorder batches, three times: every 202ed signal has exactly one receipt, and nothing else does', async (t) => {
  let gw = await startTestGateway(t, { env })
  const { dataDir, adminToken } = gw
  const src = await provision(gw)
  const accepted = new Set<string>()
  const kills: Array<{ accepted: number; lag_records: number; state: string }> = []
  for (let round = 0; round < 3; round++) {
    let kill!: () => void
    const killed = new Promise<void>((resolve) => (kill = resolve))
    const pushing = pushUntil(gw, src, accepted, killed)
    // A random moment: once 400 to 800 more signals were accepted (or 10 s passed, on a loaded machine).
    const target = accepted.size + 400 + Math.floor(Math.random() * 400)
    const deadline = Date.now() + 10_000
    while (accepted.size < target && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    const seen = (await readyz(gw)).data.recorder
    gw.proc.kill('SIGKILL')
    kill()
    await pushing
    t.equal((await gw.exited()).signal, 'SIGKILL')
    kills.push({ accepted: accepted.size, lag_records: seen.lag_records, state: seen.state })
    gw = await startTestGateway(t, { dataDir, adminToken, env })
  }
  t.comment(`at each kill: ${JSON.stringify(kills)}`)
  t.ok(accepted.size > 1000, `${accepted.size} signals accepted over ${kills.length} kills`)
  t.ok(kills.some((k) => k.state === 'running' || k.lag_records > 0), `the recorder had work in hand at a kill: ${JSON.stringify(kills)}`)

  await until('the recorder caught up after the last restart', async () => (await readyz(gw)).data.recorder?.state === 'caught_up', 30_000)
  const final = (await readyz(gw)).data.recorder
  t.same(final, { state: 'caught_up', lag_records: 0, lag_seconds: 0, disputes_pending: 0 })
  t.match(await gw.stop(), /code 0/)

  // Every signal the journal holds for the source (the 202'd ones, and any appended as the kill cut its answer).
  const journal = await openJournal({ dir: join(dataDir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  const logged = new Set<string>()
  for (let next = 1; ; ) {
    const batch = await journal.read({ fromSeq: next }, 4096)
    if (batch.length === 0) break
    for (const r of batch) {
      const s = decodeSignalRecord(r.data)
      if (s.source_id === src.sourceId) logged.add(s.signal_id)
    }
    next = batch[batch.length - 1]!.seq + 1
  }
  await journal.close()
  t.same([...accepted].filter((id) => !logged.has(id)), [], 'every 202ed signal is in the log')

  const chdbPath = join(dataDir, 'clickhouse')
  const rows = await recorderRows(chdbPath, src.sourceId)
  t.same([...accepted].filter((id) => !rows.has(id)), [], 'every 202ed signal has a receipt')
  t.same([...rows].filter(([, n]) => n !== 1), [], 'no receipt was written twice')
  t.same([...rows.keys()].filter((id) => !logged.has(id)), [], 'no receipt for anything the log does not hold')
  t.equal(rows.size, logged.size, 'one receipt per logged signal, the key test signal included')

  // As the read API counts them: through the fold, each once.
  const store = new ClickHouseReceiptStore({ target: { kind: 'chdb', path: chdbPath, maxServerMemoryBytes: 1_000_000_000 } })
  await store.open()
  t.teardown(() => store.close())
  let listed = 0
  const seenIds = new Set<string>()
  for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
    const page = await store.list({ source_id: src.sourceId, includeTest: true, limit: 1000, ...(cursor === undefined ? {} : { cursor }) })
    for (const r of page.receipts) seenIds.add(r.signal_id)
    listed += page.receipts.length
    cursor = page.next_cursor
  }
  t.equal(listed, logged.size, 'the list counts each once')
  t.equal(seenIds.size, logged.size)
})
