import { randomBytes } from 'node:crypto'
import t from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { parseVerifierKey, verifyCheckpoint, verifyConsistency, type Checkpoint } from '../../sdk/index.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { recorderRows, until } from '../helpers/recorder.js'
import { standInDatabaseUrl } from '../helpers/receipts-server.js'

/**
 * Receipts on a ClickHouse server (CLICKHOUSE_URL; the stand-in of
 * harness/clickhouse-standin.ts) shared by a gateway and two recorders on NATS: both
 * recorders start, one pulls the log and the other waits as a standby; the holder killed
 * with kill -9 mid-batch, the standby takes over once its lease lapses, and every 202ed
 * signal is a receipt exactly once; the receipt log's sequencer, leased beside each
 * recorder in the same mode, takes over with it, logs every 202ed signal, and its
 * checkpoints stay consistent with those signed before the kill; a standby stopped while
 * it waits stops at once. Every process with a gateway serves the receipt routes.
 */

const nats = await startNatsServer()
t.teardown(() => nats.close())
const adminToken = randomBytes(24).toString('hex')
const common = { NATS_URL: nats.urls, ADMIN_TOKEN: adminToken, CLICKHOUSE_URL: await standInDatabaseUrl('recorder-standby') }
// Small batches and a short flush keep the holder inside a batch most of the time.
const recorderEnv = { ...common, ROLE: 'recorder', RECORDER_BATCH: '100', RECORDER_FLUSH_MS: '20' }

async function recorderState(gw: LaunchedGateway): Promise<{ state: string; lag_records: number }> {
  return ((await (await fetch(`${gw.url}/readyz`)).json()) as { data: { recorder: { state: string; lag_records: number } } }).data.recorder
}

t.test('two recorders on one ClickHouse server: one pulls, the other takes over when it dies, every 202ed signal a receipt once', async (t) => {
  const gateway = await startTestGateway(t, { env: { ...common, ROLE: 'gateway' }, adminToken })
  const first = await startTestGateway(t, { env: recorderEnv, adminToken })
  await until('the first recorder holds the consumer', async () => (await recorderState(first)).state !== 'starting')
  const second = await startTestGateway(t, { env: recorderEnv, adminToken })
  t.match(await recorderState(second), { state: 'standby', lag_records: 0 }, 'the second one starts, as a standby')
  t.not((await recorderState(first)).state, 'standby')

  const src = await provision(gateway)
  const accepted = new Set<string>()
  let pushing = true
  const pushers = Array.from({ length: 8 }, async () => {
    while (pushing) {
      const p = payload(src.sourceId)
      const res = await push(gateway, src.sign(p))
      if (res.status === 202) accepted.add(String(p['signal_id']))
    }
  })
  await until('the first recorder is writing', async () => (await recorderRows(common.CLICKHOUSE_URL, src.sourceId)).size >= 200)
  const logKey = [parseVerifierKey((await (await fetch(`${gateway.url}/v1/log/key`)).text()).trim())]
  const checkpoint = async (): Promise<Checkpoint | undefined> => {
    const res = await fetch(`${gateway.url}/v1/log/checkpoint`)
    return res.status === 200 ? verifyCheckpoint(await res.text(), logKey) : (await res.arrayBuffer(), undefined)
  }
  await until('the first sequencer signed a checkpoint', async () => ((await checkpoint())?.size ?? 0) > 0)
  const beforeKill = (await checkpoint())!
  first.proc.kill('SIGKILL')
  t.equal((await first.exited()).signal, 'SIGKILL', 'the holder was killed')
  await until('more signals accepted with no recorder pulling', async () => accepted.size >= 600)
  pushing = false
  await Promise.all(pushers)

  // Its lease lapses 15 s after the last renewal; the standby then resumes from the last acknowledgement.
  await until('the standby took over and caught up', async () => (await recorderState(second)).state === 'caught_up', 45_000)
  const rows = await recorderRows(common.CLICKHOUSE_URL, src.sourceId)
  t.same([...accepted].filter((id) => !rows.has(id)), [], `every one of the ${accepted.size} 202ed signals has a receipt`)
  t.same([...rows].filter(([, n]) => n !== 1), [], 'no receipt was written twice')
  // The standby's sequencer logs every accepted signal once (the test signal of provisioning has no leaf).
  await until('the standby\'s sequencer logged every signal', async () => ((await checkpoint())?.size ?? 0) >= accepted.size, 45_000)
  const afterTakeover = (await checkpoint())!
  t.equal(afterTakeover.size, accepted.size, 'one leaf per 202ed signal, none twice')
  const consistency = await call(gateway.url, 'GET', `/v1/log/consistency?from=${beforeKill.size}&to=${afterTakeover.size}`)
  const proof = (consistency.body.data.proof as string[]).map((h) => Buffer.from(h, 'base64'))
  t.ok(verifyConsistency(beforeKill.size, afterTakeover.size, beforeKill.rootHash, afterTakeover.rootHash, proof), 'the checkpoint signed after the takeover extends the one signed before the kill')

  // A standby stopped while it waits stops at once, cleanly.
  const third = await startTestGateway(t, { env: recorderEnv, adminToken })
  t.equal((await recorderState(third)).state, 'standby')
  t.match(await third.stop(), /code 0/, 'a waiting standby stops cleanly')
  t.equal((await recorderState(second)).state, 'caught_up', 'the holder goes on')

  // The gateway reads them from the server too.
  const page = await call(gateway.url, 'GET', `/v1/byo/sources/${src.sourceId}/receipts?limit=1000`, { token: src.creatorToken })
  t.equal(page.status, 200)
  t.ok((page.body.data as unknown[]).length > 0, 'the gateway serves the receipts the recorders wrote')
})
