import t from 'tap'
import { openJournal } from '../../pipeline/index.js'
import { decodeSignalRecord } from '../../pipeline/index.js'
import { payload, provision, push } from '../helpers/api.js'
import { startGateway } from '../helpers/gateway-process.js'

/** Every record in the data folder's journal, read after the gateway is gone. */
async function journalSignals(dataDir: string) {
  const log = await openJournal({ dir: `${dataDir}/journal`, fsync: 'always', dedupWindowMs: 3_600_000 })
  const out: Array<{ seq: number; signal_id: string; source_id: string; received_at: string }> = []
  for (let next = 1; ; ) {
    const batch = await log.read({ fromSeq: next }, 1000)
    if (batch.length === 0) break
    for (const r of batch) out.push({ seq: r.seq, ...decodeSignalRecord(r.data) })
    next = batch[batch.length - 1]!.seq + 1
  }
  await log.close()
  return out
}

t.test('a gateway killed with kill -9 mid-burst loses no 202ed signal, and a retry after restart is deduplicated', async (t) => {
  const first = await startGateway(t)
  const src = await provision(first)
  const sent: Array<{ p: Record<string, unknown>; signed: ReturnType<typeof src.sign> }> = []
  const accepted = new Map<string, string>()
  let killed = false
  // Eight concurrent pushers; the gateway is killed while they are mid-flight.
  const pushers = Array.from({ length: 8 }, async () => {
    while (!killed) {
      const p = payload(src.sourceId)
      const signed = src.sign(p)
      sent.push({ p, signed })
      try {
        const res = await push(first, signed)
        if (res.status === 202) accepted.set(p.signal_id as string, res.body.received_at)
      } catch {
        return // connection reset by the kill
      }
    }
  })
  await new Promise((r) => setTimeout(r, 1500))
  first.proc.kill('SIGKILL')
  killed = true
  await Promise.all(pushers)
  const exit = await first.exited()
  t.equal(exit.signal, 'SIGKILL')
  t.ok(accepted.size > 50, `${accepted.size} signals were accepted before the kill`)

  const records = (await journalSignals(first.dataDir)).filter((r) => r.source_id === src.sourceId)
  const bySignal = new Map<string, number>()
  for (const r of records) bySignal.set(r.signal_id, (bySignal.get(r.signal_id) ?? 0) + 1)
  const missing = [...accepted.keys()].filter((id) => !bySignal.has(id))
  t.same(missing, [], 'every 202ed signal is in the journal')
  t.same([...bySignal.values()].filter((n) => n > 1), [], 'none is in it twice')
  for (let i = 1; i < records.length; i++) if (records[i]!.seq !== records[i - 1]!.seq + 1) t.fail('gap in sequences')

  const second = await startGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const [someId, receivedAt] = [...accepted.entries()][Math.floor(accepted.size / 2)]!
  const original = sent.find((s) => s.p.signal_id === someId)!
  const retry = await push(second, src.sign(original.p))
  t.equal(retry.status, 202, 'a retry with a fresh nonce after restart is accepted')
  t.equal(retry.body.deduplicated, true)
  t.equal(retry.body.received_at, receivedAt, 'with the original received_at')
  const replay = await push(second, original.signed)
  t.equal(replay.status, 401, 'the captured request itself is still a replay after restart')
  t.equal(replay.body.error.code, 'replayed_nonce')
  const conflict = await push(second, src.sign({ ...original.p, confidence: 3 }))
  t.equal(conflict.status, 409, 'a different body under the same signal_id still conflicts after restart')

})

t.test('registry state (tokens, sources, keys and their states) survives kill -9', async (t) => {
  const first = await startGateway(t)
  const src = await provision(first)
  first.proc.kill('SIGKILL')
  await first.exited()
  const second = await startGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const res = await push(second, src.sign(payload(src.sourceId)))
  t.equal(res.status, 202, 'the active key still verifies')
  t.equal(res.body.test, undefined, 'and is still active, not pending')
})

t.test('the nonce of a refused but verified request is still refused after kill -9 and restart', async (t) => {
  const first = await startGateway(t)
  const src = await provision(first)
  const signed = src.sign(payload(src.sourceId, { severity: 'not-a-level' }))
  t.equal((await push(first, signed)).body.error.code, 'invalid_severity')
  await new Promise((r) => setTimeout(r, 300)) // the diagnostics log is written behind the answer
  first.proc.kill('SIGKILL')
  await first.exited()
  const second = await startGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const replay = await push(second, signed)
  t.equal(replay.status, 401)
  t.equal(replay.body.error.code, 'replayed_nonce')
})
