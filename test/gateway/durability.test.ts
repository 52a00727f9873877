import { rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { openJournal } from '../../pipeline/index.js'
import { decodeSignalRecord } from '../../pipeline/index.js'
import { readStateSnapshot } from '../../pipeline/ingest/embedded/state-snapshot.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

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
  const first = await startTestGateway(t)
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
  // Killed once well past the 50 accepted signals checked below, however fast the machine
  // (a fixed 1.5 s before): the pushers are still mid-flight either way.
  for (const deadline = Date.now() + 10_000; accepted.size < 200 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20))
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

  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
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
  const first = await startTestGateway(t)
  const src = await provision(first)
  const renter = await call(first.url, 'POST', '/v1/admin/tokens', { token: first.adminToken, body: { role: 'renter', subject: 'r-kill' } })
  t.equal((await call(first.url, 'POST', `/v1/admin/tokens/${renter.body.data.token_id}/revoke`, { token: first.adminToken })).status, 200)
  await first.kill()
  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const res = await push(second, src.sign(payload(src.sourceId)))
  t.equal(res.status, 202, 'the active key still verifies')
  t.equal(res.body.test, undefined, 'and is still active, not pending')
  t.equal((await call(second.url, 'GET', `/v1/byo/sources/${src.sourceId}`, { token: src.creatorToken })).status, 200, 'the creator token still works')
  t.equal((await call(second.url, 'GET', '/v1/admin/tokens', { token: renter.body.data.token })).status, 401, 'the revoked token is still refused')
})

t.test('the nonce of a refused but verified request is still refused after kill -9 and restart', async (t) => {
  const first = await startTestGateway(t)
  const src = await provision(first)
  const signed = src.sign(payload(src.sourceId, { severity: 'not-a-level' }))
  t.equal((await push(first, signed)).body.error.code, 'invalid_severity')
  await new Promise((r) => setTimeout(r, 300)) // the diagnostics log is written behind the answer
  await first.kill()
  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const replay = await push(second, signed)
  t.equal(replay.status, 401)
  t.equal(replay.body.error.code, 'replayed_nonce')
})

t.test('a deduplicated retry keeps its nonce spent and the Idempotency-Key it brought bound after kill -9', async (t) => {
  const first = await startTestGateway(t)
  const src = await provision(first)
  const signal = payload(src.sourceId)
  const original = await push(first, src.sign(signal))
  t.equal(original.status, 202)
  const key = `idem_after_${Date.now()}`
  const retry = src.sign(signal, { idempotencyKey: key })
  t.equal((await push(first, retry)).body.deduplicated, true)
  await new Promise((r) => setTimeout(r, 300)) // the note is written behind the answer
  await first.kill()
  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const replay = await push(second, retry)
  t.equal(replay.status, 401, 'the retry itself replayed')
  t.equal(replay.body.error.code, 'replayed_nonce')
  const other = await push(second, src.sign(payload(src.sourceId), { idempotencyKey: key }))
  t.equal(other.status, 409, 'another signal under the key the retry brought')
  t.equal(other.body.error?.code, 'idempotency_conflict')
  const again = await push(second, src.sign(signal, { idempotencyKey: key }))
  t.equal(again.status, 202)
  t.equal(again.body.received_at, original.body.received_at)
})

t.test('after SIGTERM the next start takes over the saved state: retries are deduplicated, a refused request keeps its nonce spent, and after a later kill -9 the same state is taken over again', async (t) => {
  // Saves while running are tested below; here only the one at the stop.
  const env = { INGEST_STATE_SAVE_S: '0', DEDUP_WINDOW_S: '1500' }
  const first = await startTestGateway(t, { env })
  const src = await provision(first)
  const signal = payload(src.sourceId)
  const accepted = await push(first, src.sign(signal))
  t.equal(accepted.status, 202)
  const refused = src.sign(payload(src.sourceId, { severity: 'not-a-level' }))
  t.equal((await push(first, refused)).body.error.code, 'invalid_severity')
  first.proc.kill('SIGTERM')
  t.equal((await first.exited()).code, 0)
  t.ok(first.output.some((l) => l.includes('"ingest state saved for the next start"')), 'the state was saved on the way out')
  t.ok((await stat(join(first.dataDir, 'ingest-state.bin'))).size > 0)
  // The windows the service gave its stores, as the state records them: nonces for 10
  // minutes (a replay within them is refused), signal ids and Idempotency-Keys for DEDUP_WINDOW_S.
  const saved = await readStateSnapshot(join(first.dataDir, 'ingest-state.bin'))
  t.equal(saved?.nonceWindowMs, 600_000, 'nonces are kept 10 minutes')
  t.equal(saved?.dedupWindowMs, 1_500_000, 'dedup entries are kept DEDUP_WINDOW_S')
  // Without the diagnostics log, only the saved state knows the refused request's nonce.
  await rm(join(first.dataDir, 'ingest-errors'), { recursive: true })

  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken, env })
  const started = second.output.find((l) => l.includes('"from_snapshot"'))
  // Two signals: the key's test signal at provisioning, and this one.
  t.match(JSON.parse(started ?? '{}'), { from_snapshot: true, restored_signals: 0, dedup_entries: 2 }, 'nothing was read back from the journal')
  const retry = await push(second, src.sign(signal))
  t.equal(retry.body.deduplicated, true)
  t.equal(retry.body.received_at, accepted.body.received_at)
  const replay = await push(second, refused)
  t.equal(replay.status, 401)
  t.equal(replay.body.error.code, 'replayed_nonce')

  const laterSignal = payload(src.sourceId)
  const later = await push(second, src.sign(laterSignal))
  t.equal(later.status, 202)
  await second.kill()
  const third = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken, env })
  const restarted = third.output.find((l) => l.includes('"from_snapshot"'))
  t.match(JSON.parse(restarted ?? '{}'), { from_snapshot: true, restored_signals: 1 }, 'the state saved at the stop, and the journal after it: the signal accepted since')
  for (const [sent, original] of [
    [signal, accepted],
    [laterSignal, later],
  ] as const) {
    const again = await push(third, src.sign(sent))
    t.equal(again.body.deduplicated, true)
    t.equal(again.body.received_at, original.body.received_at)
  }
  t.equal((await push(third, refused)).body.error.code, 'replayed_nonce')
})

t.test('the state is saved while running, so a start after kill -9 reads only the journal since the last save', async (t) => {
  const env = { INGEST_STATE_SAVE_S: '1' }
  const first = await startTestGateway(t, { env })
  const src = await provision(first)
  const sent: Array<{ p: Record<string, unknown>; receivedAt: string }> = []
  const pushSome = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const p = payload(src.sourceId)
      const res = await push(first, src.sign(p))
      t.equal(res.status, 202)
      sent.push({ p, receivedAt: res.body.received_at })
    }
  }
  const savesLogged = () => first.output.filter((l) => l.includes('"ingest state saved"')).length
  await pushSome(30)
  // The first save covers the provisioning's test signal and these 30; wait for it.
  while (!first.output.some((l) => l.includes('"ingest state saved"') && l.includes('"log_seq":31'))) await new Promise((r) => setTimeout(r, 50))
  const savesBefore = savesLogged()
  await new Promise((r) => setTimeout(r, 1500))
  t.equal(savesLogged(), savesBefore, 'with nothing new, nothing is saved again')
  await pushSome(7)
  await first.kill()

  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken, env })
  const started = JSON.parse(second.output.find((l) => l.includes('"from_snapshot"')) ?? '{}')
  t.equal(started.from_snapshot, true, 'the saved state is taken over')
  t.ok(started.restored_signals <= 7, `${started.restored_signals} records read from the journal, not all 38 (a save may have caught some of the last 7)`)
  t.equal(started.dedup_entries, 38)
  for (const { p, receivedAt } of [sent[0]!, sent[29]!, sent[30]!, sent[36]!]) {
    const again = await push(second, src.sign(p))
    t.equal(again.body.deduplicated, true)
    t.equal(again.body.received_at, receivedAt)
  }
})

t.test('a failed journal write gets 503 not_ready, never a false 202; the gateway exits 75 and a restart recovers', async (t) => {
  // Writes past 256 KiB fail with EFBIG: the journal's segment hits it after a few hundred signals.
  const first = await startTestGateway(t, { fileSizeLimitBytes: 256 * 1024 })
  const src = await provision(first)
  const accepted: Array<{ p: Record<string, unknown>; receivedAt: string }> = []
  const refused: Array<{ p: Record<string, unknown>; status: number; code: string; retryAfter: string | null }> = []
  // Four pushers until the first refusal: the others' requests in flight meet it too.
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 2_000 && refused.length === 0; i++) {
        const p = payload(src.sourceId, { note: 'x'.repeat(280) })
        const res = await push(first, src.sign(p)).catch(() => undefined)
        if (res === undefined) return // the gateway closed the connection on its way out
        if (res.status === 202) accepted.push({ p, receivedAt: res.body.received_at })
        else refused.push({ p, status: res.status, code: res.body?.error?.code, retryAfter: res.headers.get('retry-after') })
      }
    }),
  )
  t.ok(accepted.length > 20, `${accepted.length} signals were accepted before the write failed`)
  t.ok(refused.length > 0, 'the failed write was answered')
  t.same([...new Set(refused.map((r) => `${r.status} ${r.code}`))], ['503 not_ready'], 'every refusal is 503 not_ready, never 500')
  t.ok(refused.every((r) => r.retryAfter !== null), 'each with Retry-After')
  const exit = await Promise.race([first.exited(), new Promise((r) => setTimeout(() => r('still running after 15 s'), 15_000).unref())])
  t.same(exit, { code: 75, signal: null }, 'the gateway drains and exits 75 (EX_TEMPFAIL) for its supervisor to restart it')
  t.ok(first.output.some((l) => l.includes('signal log failed')), 'after a fatal log line')

  const records = (await journalSignals(first.dataDir)).filter((r) => r.source_id === src.sourceId)
  const ids = new Set(records.map((r) => r.signal_id))
  t.same(accepted.filter((a) => !ids.has(a.p.signal_id as string)), [], 'every 202ed signal is in the journal')
  t.equal(records.length, ids.size, 'none twice')

  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const last = accepted[accepted.length - 1]!
  const dedup = await push(second, src.sign(last.p))
  t.match(dedup, { status: 202, body: { deduplicated: true, received_at: last.receivedAt } }, 'after the restart the last 202ed signal is deduplicated, with its received_at')
  // A 503 promises nothing either way: the records of a group whose write failed halfway
  // may be whole on disk, and then recovery keeps them. A retry is accepted once.
  for (const r of refused) {
    const retry = await push(second, src.sign(r.p))
    const kept = ids.has(r.p.signal_id as string)
    t.match(retry, { status: 202, body: { deduplicated: kept ? true : undefined } }, `a retry of a refused signal ${kept ? 'kept by recovery is deduplicated' : 'is accepted as new'}`)
  }

  const list = await call(second.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors`, { token: src.creatorToken })
  const listed = list.body.data.find((e: { signal_id: string }) => e.signal_id === refused[0]!.p.signal_id)
  t.match(listed, { status: 503, code: 'not_ready', key_id: src.keyId }, 'the 503 is in the source ingest-error list')
})
