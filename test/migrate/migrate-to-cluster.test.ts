import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import t from 'tap'
import { loadConfig } from '../../config/index.js'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { migrateToCluster } from '../../migrate/index.js'
import { openJournal } from '../../pipeline/index.js'
import { receiptIdOf } from '../../receipts/index.js'
import { RECORDER_CONSUMER } from '../../service/recorder-part.js'
import { parseVerifierKey, verifyCheckpoint, verifyConsistency, verifyReceipt, type ReceiptBundle } from '../../sdk/index.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { repoPath } from '../helpers/repo-root.js'
import { until } from '../helpers/wait-until.js'

// One embedded deployment, moved once into one nats-server; the refusals around it reuse both.
const nats = await startNatsServer()
t.teardown(() => nats.close())
const clusterDir = await mkdtemp(join(tmpdir(), 'sgw-cluster-recorder-'))
t.teardown(() => rm(clusterDir, { recursive: true, force: true }))

const deliveries: { id: string; body: any }[] = []
const receiver = createServer((req, res) => {
  let body = ''
  req.on('data', (c: Buffer) => (body += c.toString()))
  req.on('end', () => {
    deliveries.push({ id: String(req.headers['webhook-id']), body: JSON.parse(body) })
    res.writeHead(200).end()
  })
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { receiver.closeAllConnections(); receiver.close(() => resolve()) }))
const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`

/** A receipt's proof bundle, once a checkpoint holds its leaf. */
async function proofOf(url: string, token: string, receiptId: string): Promise<ReceiptBundle> {
  let bundle: ReceiptBundle | undefined
  await until(async () => {
    const res = await call(url, 'GET', `/v1/byo/receipts/${receiptId}/proof`, { token })
    bundle = res.status === 200 ? (res.body.data as ReceiptBundle) : undefined
    return bundle !== undefined
  }, 20_000, `the proof of ${receiptId}`)
  return bundle!
}

const logText = async (url: string, path: string) => (await fetch(`${url}${path}`)).text()

/** The built command, as an operator runs it; resolves with its exit code and output. */
function migrate(env: Record<string, string>, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [repoPath('dist/migrate/main.js'), ...args], { env: { PATH: process.env['PATH'] ?? '', ...env } }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr })
    })
  })
}

t.test('an embedded deployment moved into a cluster keeps its tokens, rentals, webhooks, receipts, receipt log and dedup; a second move is refused', async (t) => {
  const common = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', RECEIPT_LOG_CHECKPOINT_MS: '200', PUBLIC_BASE_URL: 'https://receipts.example' }
  const embedded = await startTestGateway(t, { env: { ...common, NATS_URL: '' } })
  const src = await provision(embedded)
  const renter = (await call(embedded.url, 'POST', '/v1/admin/tokens', { token: embedded.adminToken, body: { role: 'renter', subject: 'renter:alice' } })).body.data.token as string
  const rental = (await call(embedded.url, 'POST', '/v1/admin/rentals', { token: embedded.adminToken, body: { renter_id: 'renter:alice', source_id: src.sourceId } })).body.data
  t.equal((await call(embedded.url, 'PUT', `/v1/rentals/${rental.rental_id}/webhook`, { token: renter, body: { url: hook } })).status, 200)
  const bodies = [payload(src.sourceId), payload(src.sourceId), payload(src.sourceId)]
  const first = src.sign(bodies[0])
  t.equal((await push(embedded, first)).status, 202)
  for (const b of bodies.slice(1)) t.equal((await push(embedded, src.sign(b))).status, 202)
  const receiptsPath = `/v1/byo/sources/${src.sourceId}/receipts`
  const receiptIds = async (url: string) => ((await call(url, 'GET', receiptsPath, { token: src.creatorToken })).body.data ?? []).map((r: any) => r.receipt_id as string).sort()
  const signalIds = async (url: string) => ((await call(url, 'GET', receiptsPath, { token: src.creatorToken })).body.data ?? []).map((r: any) => r.signal_id as string)
  const recorded = async (url: string, ids: readonly unknown[]) => {
    const held = await signalIds(url)
    return ids.every((id) => held.includes(id as string))
  }
  await until(() => recorded(embedded.url, bodies.map((b) => b['signal_id'])), 20_000, 'the embedded receipts')
  await until(() => deliveries.length === 3, 20_000, 'the embedded webhook deliveries')
  const before = await receiptIds(embedded.url)
  const keysBefore = (await call(embedded.url, 'GET', '/v1/delivery-keys')).body.data
  const lastEmbeddedSeq = Math.max(...deliveries.map((d) => Number(d.body.event_id)))
  // The last signal's leaf is the log's last: once a checkpoint holds it, the embedded log is complete.
  const lastReceipt = receiptIdOf(src.sourceId, bodies[2]!['signal_id'] as string)
  const bundleBefore = await proofOf(embedded.url, src.creatorToken, lastReceipt)
  const logKey = (await logText(embedded.url, '/v1/log/key')).trim()
  const checkpointTextBefore = await logText(embedded.url, '/v1/log/checkpoint')
  const checkpointBefore = verifyCheckpoint(checkpointTextBefore, [parseVerifierKey(logKey)])
  t.equal(checkpointBefore.size, 3, 'the three signals logged and checkpointed (the test signal has no leaf)')

  const env = { ...common, DATA_DIR: embedded.dataDir, NATS_URL: nats.urls, ADMIN_TOKEN: embedded.adminToken }
  const locked = await migrate(env, ['--recorder-data-dir', clusterDir])
  t.equal(locked.code, 1, 'refused while the embedded gateway runs')
  t.match(locked.stderr, /refused \(data_dir_locked\): the embedded gateway still runs/)

  await embedded.stop()
  const renamed = await migrate({ ...env, PUBLIC_BASE_URL: 'https://elsewhere.example' }, ['--recorder-data-dir', clusterDir])
  t.equal(renamed.code, 1, 'refused: the cluster would name the receipt log otherwise')
  t.match(renamed.stderr, /refused \(log_origin_differs\): the embedded receipt log's checkpoints name the log "receipts.example\/log"/)
  const moved = await migrate(env, ['--recorder-data-dir', clusterDir])
  t.equal(moved.code, 0, moved.stderr)
  t.match(moved.stdout, /bucket registry: [1-9]\d* entries copied/)
  t.match(moved.stdout, /bucket rentals: [1-9]\d* entries copied/)
  t.match(moved.stdout, /signal index: 4 accepted signals/, 'the three signals and the test signal of provisioning')
  const [, held, inCluster] = /receipts: (\d+) in the data folder, \d+ rows loaded, (\d+) in the cluster/.exec(moved.stdout) ?? []
  t.ok(Number(held) >= 3, 'the receipts counted')
  t.equal(inCluster, held, 'every receipt in the cluster')
  t.match(moved.stdout, new RegExp(`signal stream: its first record will be seq ${lastEmbeddedSeq + 1}`))
  t.match(moved.stdout, /bucket log-keys: 1 entries copied/)
  t.match(moved.stdout, /receipt log: 3 leaves in the cluster \(rows written: 3 leaves, [4-9] signed requests, [1-9]\d* checkpoints\); the cluster signs on from the checkpoint of size 3/)

  const cluster = await startTestGateway(t, { dataDir: clusterDir, adminToken: embedded.adminToken, env: { ...common, NATS_URL: nats.urls } })
  t.equal((await call(cluster.url, 'GET', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}`, { token: src.creatorToken })).status, 200, 'the creator token, source and key')
  t.equal((await call(cluster.url, 'GET', `/v1/rentals/${rental.rental_id}/webhook`, { token: renter })).body.data?.url, hook, 'the renter token, rental and webhook')
  t.same((await call(cluster.url, 'GET', '/v1/delivery-keys')).body.data, keysBefore, 'the delivery key ring')
  t.same(await receiptIds(cluster.url), before, 'the receipts')
  t.equal((await logText(cluster.url, '/v1/log/key')).trim(), logKey, 'the log key')
  t.equal(await logText(cluster.url, '/v1/log/checkpoint'), checkpointTextBefore, 'the cluster serves the last checkpoint the embedded deployment signed')
  t.ok(verifyReceipt(bundleBefore, { logKey }).creatorSigned, 'a proof taken before the move still verifies')
  t.same(await proofOf(cluster.url, src.creatorToken, lastReceipt), bundleBefore, 'the cluster serves the same proof')

  const retried = await push(cluster, src.sign(bodies[0]))
  t.equal(retried.status, 202, 'a retry of an accepted signal with a fresh nonce')
  t.equal(retried.body.deduplicated, true, 'is answered as a duplicate')
  t.equal(retried.body.received_at, (await call(cluster.url, 'GET', receiptsPath, { token: src.creatorToken })).body.data.find((r: any) => r.signal_id === bodies[0]!['signal_id']).received_at)
  const replayed = await push(cluster, first)
  t.equal(replayed.status, 401, 'the very request replayed')
  t.equal(replayed.body.error.code, 'replayed_nonce')

  const next = payload(src.sourceId)
  t.equal((await push(cluster, src.sign(next))).status, 202)
  await until(() => deliveries.length === 4, 20_000, 'the webhook delivery from the cluster')
  t.equal(Number(deliveries[3]!.body.event_id), lastEmbeddedSeq + 1, 'event ids go on from the journal')
  await until(() => recorded(cluster.url, [next['signal_id']]), 20_000, 'the cluster recorder')
  const nextBundle = await proofOf(cluster.url, src.creatorToken, receiptIdOf(src.sourceId, next['signal_id'] as string))
  t.equal(nextBundle.leaf_index, 3, 'the cluster\'s sequencer logs after the moved leaves')
  const checkpointTextAfter = await logText(cluster.url, '/v1/log/checkpoint')
  const checkpointAfter = verifyCheckpoint(checkpointTextAfter, [parseVerifierKey(logKey)])
  t.ok(checkpointAfter.size > checkpointBefore.size, 'the cluster signed a new checkpoint with the moved key')
  const consistency = await call(cluster.url, 'GET', `/v1/log/consistency?from=${checkpointBefore.size}&to=${checkpointAfter.size}`)
  const proofText = consistency.body.data.proof as string[]
  const proof = proofText.map((h) => Buffer.from(h, 'base64'))
  t.ok(verifyConsistency(checkpointBefore.size, checkpointAfter.size, checkpointBefore.rootHash, checkpointAfter.rootHash, proof), 'the cluster\'s checkpoint extends the embedded deployment\'s last one')
  t.equal(verifyReceipt(bundleBefore, { logKey, checkpoint: checkpointTextAfter, consistencyProof: proofText }).leafIndex, 2, 'a proof taken before the move, checked against the cluster\'s checkpoint')

  await cluster.stop()
  const again = await migrate(env, ['--recorder-data-dir', clusterDir])
  t.equal(again.code, 1, 'a second move is refused')
  t.match(again.stderr, new RegExp(`refused \\(cluster_not_empty\\): the cluster already holds state \\(bucket registry: \\d+ entries.*signal stream SIGNALS: up to seq \\d+; receipts: ${Number(held) + 1}; receipt log: 4 leaves\\)`))
  const resumedAfterEnd = await migrate(env, ['--recorder-data-dir', clusterDir, '--resume'])
  t.equal(resumedAfterEnd.code, 1)
  t.match(resumedAfterEnd.stderr, /no_move_to_resume/)
})

t.test('a journal its recorder has not caught up with is refused before anything is written', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'sgw-migrate-behind-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  await mkdir(join(dataDir, 'kv'))
  const journal = await openJournal({ dir: join(dataDir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  await journal.append('src/sig-1', Buffer.from('{}'))
  await journal.close()
  const config = loadConfig({ DATA_DIR: dataDir, NATS_URL: nats.urls, ADMIN_TOKEN: 'a'.repeat(40) })
  await t.rejects(migrateToCluster({ config, logger: pino({ level: 'silent' }), resume: false, recorderDataDir: join(dataDir, 'recorder') }), { code: 'recorder_behind', message: /recorded the journal up to seq 0 of 1/ })
})

t.test('a journal its receipt log has not logged to the end is refused before anything is written', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'sgw-migrate-unlogged-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  await mkdir(join(dataDir, 'kv'))
  const journal = await openJournal({ dir: join(dataDir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  await journal.append('src/sig-1', Buffer.from('{}'))
  const recorder = await journal.consumer(RECORDER_CONSUMER)
  await recorder.fetch(1, 1000)
  await recorder.ack(1)
  await recorder.close()
  await journal.close()
  const config = loadConfig({ DATA_DIR: dataDir, NATS_URL: nats.urls, ADMIN_TOKEN: 'a'.repeat(40) })
  await t.rejects(migrateToCluster({ config, logger: pino({ level: 'silent' }), resume: false, recorderDataDir: join(dataDir, 'recorder') }), { code: 'receipt_log_behind', message: /logged the journal up to seq 0 of 1/ })
})

t.test('a bucket this release does not move is refused rather than left behind', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'sgw-migrate-unknown-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  await mkdir(join(dataDir, 'kv', 'outcomes'), { recursive: true })
  const config = loadConfig({ DATA_DIR: dataDir, NATS_URL: nats.urls, ADMIN_TOKEN: 'a'.repeat(40) })
  await t.rejects(migrateToCluster({ config, logger: pino({ level: 'silent' }), resume: false, recorderDataDir: join(dataDir, 'recorder') }), { code: 'unknown_bucket', message: /outcomes/ })
})
