import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { generateCreatorKey } from '../../harness/signed-push.js'
import { decodeSignalRecord, openJournal, placementIn } from '../../pipeline/index.js'
import { ClickHouseReceiptStore } from '../../receipts/index.js'
import { mapRecord } from '../../recorder/receipt-input.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { namingBreaches, parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js'
import { until } from '../helpers/recorder.js'

t.test('disputes opened, accepted and rejected through the API show on the receipts they name', async (t) => {
  const gw = await startTestGateway(t, { env: { RECORDER_FLUSH_MS: '20' } })
  const src = await provision(gw)
  // Five signals under the key that will leak.
  const answers: Array<{ signal_id: string; received_at: string }> = []
  for (let i = 0; i < 5; i++) {
    const res = await push(gw, src.sign(payload(src.sourceId)))
    t.equal(res.status, 202)
    answers.push(res.body)
  }
  // The compromise flow: a new key takes over, the leaked one is revoked.
  const next = generateCreatorKey()
  const keyId = (await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken, body: { public_key: next.publicKeyBase64 } })).body.data.key_id as string
  t.equal((await push(gw, src.sign(payload(src.sourceId), { key: next, keyId }))).status, 202)
  t.equal((await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${keyId}/promote`, { token: src.creatorToken })).status, 200)
  t.equal((await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}/revoke`, { token: src.creatorToken })).status, 200)

  const open = async (signals: typeof answers) => {
    const res = await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/disputes`, {
      token: src.creatorToken,
      body: { key_id: src.keyId, signals: signals.map(({ signal_id, received_at }) => ({ signal_id, received_at })), evidence: 'the key leaked in a CI log' },
    })
    t.equal(res.status, 201)
    return res.body.data.dispute_id as string
  }
  const decide = async (disputeId: string, action: 'accept' | 'reject') => {
    const res = await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/disputes/${disputeId}/${action}`, { token: gw.adminToken, body: {} })
    t.equal(res.status, 200)
    return res.body.data as { after_seq?: number }
  }

  const accepted = await open(answers.slice(0, 2))
  const rejected = await open(answers.slice(2, 3))
  await open(answers.slice(3, 4))
  const afterSeq = (await decide(accepted, 'accept')).after_seq as number
  await decide(rejected, 'reject')
  const recorder = async () => ((await (await fetch(`${gw.url}/readyz`)).json()) as any).data.recorder
  await until('every signal and dispute state recorded', async () => {
    const r = await recorder()
    return r.state === 'caught_up' && r.disputes_pending === 0
  })
  // /readyz: 200 with the recorder's detail; /metrics: its lag and counts.
  const ready = await fetch(`${gw.url}/readyz`)
  t.equal(ready.status, 200)
  t.same(((await ready.json()) as any).data, { status: 'ready', role: 'all', verify_queue: 0, delivery: { open_streams: 0 }, recorder: { state: 'caught_up', lag_records: 0, lag_seconds: 0, disputes_pending: 0 } })
  const page = parsePrometheusText(await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })).text())
  t.same(namingBreaches(page), [])
  t.equal(sampleValue(page, 'sgw_recorder_lag_records'), 0)
  t.equal(sampleValue(page, 'sgw_recorder_lag_seconds'), 0)
  t.equal(sampleValue(page, 'sgw_receipts_recorded_total'), 7, 'five signals and two test signals')
  t.ok((sampleValue(page, 'sgw_recorder_batches_total', { result: 'ok' }) ?? 0) >= 1)
  t.equal(sampleValue(page, 'sgw_recorder_batches_total', { result: 'retry' }), 0)
  t.equal(sampleValue(page, 'sgw_recorder_lost_records_total'), 0)
  t.equal(sampleValue(page, 'sgw_recorder_undecodable_records_total'), 0, 'the dispute\'s placement record is passed over, not counted as a bad signal record')
  t.equal(sampleValue(page, 'sgw_recorder_disputes_pending'), 0)
  t.match(await gw.stop(), /code 0/)

  // The gateway is gone: its chDB folder is this process's now.
  const store = new ClickHouseReceiptStore({ target: { kind: 'chdb', path: join(gw.dataDir, 'clickhouse'), maxServerMemoryBytes: 1_000_000_000 } })
  await store.open()
  const { receipts } = await store.list({ source_id: src.sourceId, limit: 100 })
  const status = new Map(receipts.map((r) => [r.signal_id, r.dispute_status]))
  t.same(
    answers.map((a) => status.get(a.signal_id)),
    ['disputed', 'disputed', 'rejected', 'open', 'none'],
    'accepted → disputed, rejected → rejected, still open → open, not named → none',
  )
  t.equal(receipts.length, 5, 'disputed signals stay in the record')
  const all = (await store.list({ source_id: src.sourceId, limit: 100, includeTest: true })).receipts
  t.equal(all.filter((r) => r.test).length, 2, 'and the two keys\' test signals are test receipts')
  t.equal((await store.list({ source_id: src.sourceId, status: 'disputed' })).receipts.length, 2)
  await store.close()

  // The accepted dispute's after_seq is its placement record in the log, and it is no signal.
  const log = await openJournal({ dir: join(gw.dataDir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  const [record] = await log.read({ fromSeq: afterSeq }, 1)
  await log.close()
  t.equal(record?.seq, afterSeq)
  t.equal(record?.sourceId, src.sourceId, 'under the dispute\'s source')
  t.match(placementIn(record!), { seq: afterSeq, sourceId: src.sourceId, disputeId: accepted }, 'a placement of the accepted dispute')
  t.throws(() => decodeSignalRecord(record!.data), 'no reader takes it for a signal record')
  t.same(mapRecord(record!, () => 'agent'), { kind: 'not_a_signal' }, 'the recorder makes no receipt of it')

  // Without its saved state, a restart rebuilds the ingest state from the log, placement included, and still answers for the signals.
  await rm(join(gw.dataDir, 'ingest-state.bin'), { force: true })
  const again = await startTestGateway(t, { dataDir: gw.dataDir, adminToken: gw.adminToken })
  const retry = await push(again, src.sign(payload(src.sourceId), { key: next, keyId }))
  t.equal(retry.status, 202, 'the restarted gateway takes signals')
  t.equal((await call(again.url, 'GET', `/v1/byo/sources/${src.sourceId}/signals/${answers[0]!.signal_id}`, { token: src.creatorToken })).body.data.state, 'disputed')
})
