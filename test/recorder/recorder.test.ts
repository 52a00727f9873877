import t from 'tap'
import { chdbFolder } from '../helpers/receipts.js'
import { bench, FaultyStore, recorderRows, revokedKey, signalRecordBytes, until } from '../helpers/recorder.js'
import type { ReceiptInput } from '../../receipts/index.js'
import type { Recorder } from '../../recorder/index.js'
import { mapRecord } from '../../recorder/receipt-input.js'

// The recorder over a real journal, a real registry and the real receipt store on chDB.
// libchdb binds one data folder per process: every test here shares one engine, each on
// a source of its own.
const chdb = await chdbFolder(t)
const engine = await chdb.open()

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(5, '0')}`)

t.test('every record becomes one receipt; test signals are test receipts, listed for their creator only', async (t) => {
  const b = await bench(t)
  const store = new FaultyStore(engine)
  await b.append(ids('live', 1200))
  await b.append(ids('test', 3), { test: true })
  const recorder = b.recorder(store, { batchMax: 500 })
  recorder.start()
  await until('caught up', () => recorder.status().state === 'caught_up')
  t.same(recorder.status(), { state: 'caught_up', lag_records: 0, lag_seconds: 0, disputes_pending: 0 })
  t.equal(recorder.counts().recorded, 1203)
  t.ok(recorder.counts().batchesOk >= 3, 'in batches of at most 500')
  const rows = await recorderRows(chdb.path, b.source.source_id)
  t.equal(rows.size, 1203)
  t.same([...rows.values()].filter((n) => n !== 1), [], 'one row each')
  const page = await engine.list({ source_id: b.source.source_id, limit: 1000, includeTest: true, severity: 'warning' })
  t.equal(page.receipts.filter((r) => r.test).length, 3, 'the test signals are test receipts')
  t.equal(page.receipts[0]?.agent_id, b.source.agent_id, 'with the agent of the source')
  const publicPage = await engine.list({ source_id: b.source.source_id, limit: 1000 })
  t.equal(publicPage.receipts.filter((r) => r.test).length, 0, 'never listed without includeTest')
  // More appends while it runs: it waits for them rather than polling.
  await b.append(ids('later', 10))
  await until('the later ones recorded', () => recorder.counts().recorded === 1213)
  await recorder.close()
  t.equal(recorder.status().state, 'stopped')
})

t.test('a batch written whose confirmation was lost is handed out again and makes no second receipt', async (t) => {
  const b = await bench(t)
  const store = new FaultyStore(engine)
  store.loseConfirmations = 2
  await b.append(ids('redelivered', 300))
  const recorder = b.recorder(store, { batchMax: 300 })
  recorder.start()
  await until('caught up', () => recorder.status().state === 'caught_up')
  const counts = recorder.counts()
  t.equal(counts.batchesRetried, 2, 'two attempts failed after writing')
  t.equal(counts.recorded, 0, 'the retries wrote nothing (the failed attempts wrote the 300, uncounted)')
  t.equal(counts.alreadyRecorded, 300)
  const rows = await recorderRows(chdb.path, b.source.source_id)
  t.equal(rows.size, 300)
  t.same([...rows.values()].filter((n) => n !== 1), [], 'one row each')
})

t.test('a crash between the insert and the acknowledgement: the next holder, in smaller batches, writes none of it again', async (t) => {
  const b = await bench(t)
  await b.append(ids('crashed', 400))
  let crashed!: Recorder
  class CrashAfterInsert extends FaultyStore {
    override async record(...args: Parameters<FaultyStore['record']>) {
      const result = await super.record(...args)
      await crashed.destroy()
      return result
    }
  }
  crashed = b.recorder(new CrashAfterInsert(engine), { batchMax: 400, flushMs: 200 })
  crashed.start()
  await until('the crash', () => crashed.status().state === 'stopped')
  t.equal((await b.journal.consumerInfo('recorder'))?.ackSeq ?? 0, 0, 'nothing acknowledged')
  const next = b.recorder(new FaultyStore(engine), { batchMax: 100 })
  next.start()
  await until('caught up', () => next.status().state === 'caught_up')
  t.same([next.counts().recorded, next.counts().alreadyRecorded], [0, 400])
  const rows = await recorderRows(chdb.path, b.source.source_id)
  t.equal(rows.size, 400)
  t.same([...rows.values()].filter((n) => n !== 1), [], 'one row each')
})

t.test('a batch a frozen previous holder writes after the take-over is not written again, past the first batch too', async (t) => {
  const b = await bench(t)
  await b.append(ids('late', 400))
  const previousHolder = await chdb.open()
  // The previous holder's insert of all 400 lands after this holder built its filter of
  // recorded ids, so only the records it verifies are looked up.
  class LateWrite extends FaultyStore {
    #built: Promise<void> | undefined
    #landed = false
    override trackRecordedIds() {
      this.#built = super.trackRecordedIds()
      return this.#built
    }
    override async record(...args: Parameters<FaultyStore['record']>) {
      if (!this.#landed) {
        this.#landed = true
        await this.#built
        const records = await b.journal.read({ fromSeq: 1 }, 400)
        await previousHolder.record(records.map((r) => (mapRecord(r, () => b.source.agent_id) as { input: ReceiptInput }).input))
      }
      return super.record(...args)
    }
  }
  const recorder = b.recorder(new LateWrite(engine), { batchMax: 100 })
  recorder.start()
  await until('caught up', () => recorder.status().state === 'caught_up')
  t.ok(recorder.counts().batchesOk >= 4, 'in batches of 100')
  t.same([recorder.counts().recorded, recorder.counts().alreadyRecorded], [0, 400])
  const rows = await recorderRows(chdb.path, b.source.source_id)
  t.same([...rows.values()].filter((n) => n !== 1), [], 'one row each')
})

t.test('a signal_id accepted again after the dedup window keeps its first receipt', async (t) => {
  const b = await bench(t)
  const recorder = b.recorder(engine)
  await b.append(['reused'], { keyId: 'key_first' })
  recorder.start()
  await until('recorded', () => recorder.counts().recorded === 1)
  // The journal's dedup window is off here (as in the service): the same signal_id again, signed by another key.
  await b.journal.append(`${b.source.source_id}/reused-again`, signalRecordBytes(b.source.source_id, 'reused', { keyId: 'key_second' }), { sourceId: b.source.source_id })
  await b.append(['after'])
  await until('caught up', () => recorder.counts().recorded === 2 && recorder.status().lag_records === 0)
  t.equal(recorder.counts().alreadyRecorded, 1)
  const page = await engine.list({ source_id: b.source.source_id })
  t.same(page.receipts.map((r) => r.signal_id).sort(), ['after', 'reused'])
  t.equal(page.receipts.find((r) => r.signal_id === 'reused')?.key_id, 'key_first', 'the first acceptance is the receipt')
})

t.test('while the store is down ingest appends go on and lag grows; once it recovers the recorder catches up, each signal once', async (t) => {
  const b = await bench(t)
  const store = new FaultyStore(engine)
  const recorder = b.recorder(store, { batchMax: 400 })
  await b.append(ids('before', 100))
  recorder.start()
  await until('the first ones recorded', () => recorder.status().state === 'caught_up')
  store.failing = true
  const appended = await b.append(ids('during', 1500))
  t.equal(appended.length, 1500, 'the log takes every append while the store is down')
  await until('retrying', () => recorder.status().state === 'retrying')
  await new Promise((r) => setTimeout(r, 300))
  const down = recorder.status()
  t.equal(down.lag_records, 1500)
  t.ok(down.lag_seconds >= 0.2, `lag_seconds ${down.lag_seconds} counts from the oldest unrecorded signal`)
  t.match(down.last_error, /unavailable: .*injected outage/)
  t.ok(b.logged.some((l) => l.level === 'warn' && /retrying with backoff/.test(l.msg)), 'each failure logged as a warning')
  const callsWhileDown = store.recordCalls
  await new Promise((r) => setTimeout(r, 500))
  t.ok(store.recordCalls - callsWhileDown <= 5, `backoff spaces the attempts (${store.recordCalls - callsWhileDown} in 500 ms, waits capped at 200 ms)`)
  store.failing = false
  await until('caught up again', () => recorder.status().state === 'caught_up')
  t.same(recorder.status(), { state: 'caught_up', lag_records: 0, lag_seconds: 0, disputes_pending: 0 })
  t.ok(recorder.counts().batchesRetried >= 2)
  const rows = await recorderRows(chdb.path, b.source.source_id)
  t.equal(rows.size, 1600)
  t.same([...rows.values()].filter((n) => n !== 1), [], 'one row each')
})

t.test('a permanent store error is logged as an error and retried at the longest wait; no record is skipped', async (t) => {
  const b = await bench(t)
  const { ReceiptStoreError } = await import('../../receipts/index.js')
  let refuse = true
  const store = new FaultyStore(engine)
  const original = store.record.bind(store)
  store.record = async (batch) => {
    if (refuse) throw new ReceiptStoreError('store_failed', 'receipt store: injected refusal')
    return original(batch)
  }
  await b.append(ids('refused', 20))
  const recorder = b.recorder(store, { retryBaseMs: 10, retryMaxMs: 300 })
  recorder.start()
  await until('retrying', () => recorder.status().state === 'retrying')
  await new Promise((r) => setTimeout(r, 700))
  t.ok(recorder.counts().batchesRetried <= 4, `at most every 150 to 300 ms (${recorder.counts().batchesRetried} attempts in 700 ms)`)
  t.ok(b.logged.some((l) => l.level === 'error' && /retrying slowly, no record is skipped/.test(l.msg)))
  t.match(recorder.status().last_error, /store_failed/)
  refuse = false
  await until('caught up', () => recorder.status().state === 'caught_up')
  t.equal(recorder.counts().recorded, 20)
})

t.test('records retention removed before the recorder read them are reported as an exact range and counted, once', async (t) => {
  const b = await bench(t, { segmentBytes: 4096 })
  // The recorder's durable consumer exists (at position 0) before retention runs, as after a first start.
  await (await b.journal.consumer('recorder')).close()
  const seqs = await b.append(ids('old', 60))
  // Retention as the journal applies it: whole sealed segments, before the recorder ever ran.
  const purged = await b.journal.purge(seqs[40]!)
  t.ok(purged.toSeq > 0, `retention removed seqs ${purged.fromSeq} to ${purged.toSeq}`)
  const store = new FaultyStore(engine)
  store.loseConfirmations = 1 // a nak after the loss was told: it must not be counted twice
  const recorder = b.recorder(store)
  recorder.start()
  await until('caught up', () => recorder.status().state === 'caught_up')
  t.equal(recorder.counts().lostRecords, purged.toSeq - purged.fromSeq + 1)
  const lost = b.logged.filter((l) => /removed these records/.test(l.msg))
  t.same(lost.map((l) => l.obj), [{ from_seq: purged.fromSeq, to_seq: purged.toSeq, count: purged.toSeq - purged.fromSeq + 1 }])
  t.equal(lost[0]?.level, 'error')
  t.equal((await recorderRows(chdb.path, b.source.source_id)).size, 60 - (purged.toSeq - purged.fromSeq + 1), 'the rest are recorded')
})

t.test('a record of a source the registry does not know waits out the grace, then is recorded without an agent', async (t) => {
  const b = await bench(t)
  await b.append(['orphan'], { sourceId: 'src_not_in_registry' })
  await b.append(['known'])
  const recorder = b.recorder(engine, { unknownSourceGraceMs: 300 })
  const t0 = Date.now()
  recorder.start()
  await until('caught up', () => recorder.status().state === 'caught_up')
  t.ok(Date.now() - t0 >= 300, 'not before the grace')
  t.equal(recorder.counts().unknownSourceRecords, 1)
  const [orphan] = (await engine.list({ source_id: 'src_not_in_registry' })).receipts
  t.equal(orphan?.agent_id, '')
  t.equal((await engine.list({ source_id: b.source.source_id })).receipts.length, 1, 'the record after it too')
})

t.test('a record that is not a signal record is logged, counted and skipped', async (t) => {
  const b = await bench(t)
  await b.journal.append('junk', Buffer.from('{"v":2}'), { sourceId: b.source.source_id })
  await b.append(['fine'])
  const recorder = b.recorder(engine)
  recorder.start()
  await until('caught up', () => recorder.status().state === 'caught_up')
  t.equal(recorder.counts().undecodableRecords, 1)
  t.ok(b.logged.some((l) => l.level === 'error' && l.obj.seq === 1))
  t.equal(recorder.counts().recorded, 1)
})

t.test('dispute states reach the receipts they name, even when the store was down as the dispute changed', async (t) => {
  const b = await bench(t)
  const store = new FaultyStore(engine)
  const [s1, s2, s3] = await b.append(['d-1', 'd-2', 'd-3'])
  const recorder = b.recorder(store)
  recorder.start()
  await until('recorded', () => recorder.status().state === 'caught_up')
  const keyId = await revokedKey(b.registry, b.source.source_id)
  const signal = (signal_id: string, seq: number) => ({ signal_id, received_at: new Date().toISOString(), seq })
  const status = async (signalId: string) => (await engine.list({ source_id: b.source.source_id })).receipts.find((r) => r.signal_id === signalId)?.dispute_status

  store.failing = true
  const opened = await b.registry.openDispute({ source: b.source, keyId, signals: [signal('d-1', s1!), signal('d-2', s2!)], evidence: 'leaked', openedBy: 'creator' })
  await until('retrying', () => recorder.counts().disputeFailures > 0)
  t.equal(recorder.status().disputes_pending, 1, 'the change waits while the store is down')
  store.failing = false
  await until('written', () => recorder.status().disputes_pending === 0)
  t.equal(await status('d-1'), 'open')
  t.equal(await status('d-2'), 'open')
  t.equal(await status('d-3'), 'none')

  await b.registry.resolveDispute(b.source.source_id, opened.dispute_id, 'accepted', 'confirmed')
  await until('written', () => recorder.status().disputes_pending === 0)
  t.equal(await status('d-1'), 'disputed')
  t.equal(await status('d-2'), 'disputed', 'disputed signals stay in the record')

  const other = await b.registry.openDispute({ source: b.source, keyId, signals: [signal('d-3', s3!)], evidence: 'leaked too', openedBy: 'creator' })
  await b.registry.resolveDispute(b.source.source_id, other.dispute_id, 'rejected', null)
  await until('written', () => recorder.status().disputes_pending === 0)
  t.equal(await status('d-3'), 'rejected')

  // A restart writes every state again: harmless, each receipt still folds to one.
  await recorder.close()
  const again = b.recorder(engine)
  again.start()
  await until('written again', () => again.status().state === 'caught_up' && again.status().disputes_pending === 0)
  t.same(
    (await engine.list({ source_id: b.source.source_id })).receipts.map((r) => [r.signal_id, r.dispute_status]).sort(),
    [['d-1', 'disputed'], ['d-2', 'disputed'], ['d-3', 'rejected']],
  )
  t.equal((await engine.list({ source_id: b.source.source_id, status: 'disputed' })).receipts.length, 2, 'filters count each receipt once')
})

t.test('a dispute naming a signal the recorder has not reached waits for it, then lands on its receipt', async (t) => {
  const b = await bench(t)
  const store = new FaultyStore(engine)
  store.failing = true
  const [seq] = await b.append(['ahead'])
  const recorder = b.recorder(store)
  recorder.start()
  const keyId = await revokedKey(b.registry, b.source.source_id)
  await b.registry.openDispute({ source: b.source, keyId, signals: [{ signal_id: 'ahead', received_at: new Date().toISOString(), seq: seq! }], evidence: 'x', openedBy: 'creator' })
  await until('retrying', () => recorder.status().state === 'retrying')
  t.equal(recorder.status().disputes_pending, 1)
  store.failing = false
  await until('both written', () => recorder.status().state === 'caught_up' && recorder.status().disputes_pending === 0)
  const [receipt] = (await engine.list({ source_id: b.source.source_id })).receipts
  t.equal(receipt?.dispute_status, 'open')
})

t.test('close finishes the batch in flight and a new recorder resumes after it', async (t) => {
  const b = await bench(t)
  const store = new FaultyStore(engine)
  await b.append(ids('resume', 500))
  const first = b.recorder(store, { batchMax: 100, flushMs: 0 })
  first.start()
  await until('some recorded', () => first.counts().recorded >= 100)
  await first.close()
  const position = (await b.journal.consumerInfo('recorder'))?.ackSeq ?? 0
  t.equal(first.counts().recorded, position, 'everything written was acknowledged')
  const second = b.recorder(store, { batchMax: 100 })
  second.start()
  await until('caught up', () => second.status().state === 'caught_up')
  t.equal(second.counts().alreadyRecorded, 0, 'nothing handed out twice')
  const rows = await recorderRows(chdb.path, b.source.source_id)
  t.equal(rows.size, 500)
})
