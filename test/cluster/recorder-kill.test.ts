import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import t from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { recorderRows, until } from '../helpers/recorder.js'
import { receiptsEnv } from '../helpers/receipts-server.js'

/**
 * The recorder on NATS killed with kill -9 mid-batch while a gateway takes signals, then
 * started again on its DATA_DIR: it takes its lease back once the dead one's lapses and
 * resumes its durable consumer, and every 202ed signal ends up a receipt exactly once.
 * Run by test/on-clickhouse-server/ with the receipts on a ClickHouse server that the
 * gateway and the recorders share (CLICKHOUSE_URL); the recorder started again is then a
 * standby until the dead one's lease lapses.
 */

const nats = await startNatsServer()
t.teardown(() => nats.close())
const adminToken = randomBytes(24).toString('hex')
const receipts = await receiptsEnv('recorder-kill')
const common = { NATS_URL: nats.urls, ADMIN_TOKEN: adminToken, ...receipts }
// Small batches and a short flush keep the recorder inside a batch most of the time.
const recorderEnv = { ...common, ROLE: 'recorder', RECORDER_BATCH: '100', RECORDER_FLUSH_MS: '20' }

async function recorderState(gw: LaunchedGateway): Promise<{ state: string; lag_records: number }> {
  return ((await (await fetch(`${gw.url}/readyz`)).json()) as { data: { recorder: { state: string; lag_records: number } } }).data.recorder
}

t.test('the recorder killed mid-batch and started again: every 202ed signal is a receipt exactly once', async (t) => {
  const gateway = await startTestGateway(t, { env: { ...common, ROLE: 'gateway' }, adminToken })
  const recorder = await startTestGateway(t, { env: recorderEnv, adminToken })
  const src = await provision(gateway)
  const accepted = new Set<string>([])
  let pushing = true
  const pushers = Array.from({ length: 8 }, async () => {
    while (pushing) {
      const p = payload(src.sourceId)
      const res = await push(gateway, src.sign(p))
      if (res.status === 202) accepted.add(String(p['signal_id']))
    }
  })
  await until('the recorder is writing', async () => accepted.size >= 300)
  recorder.proc.kill('SIGKILL')
  t.equal((await recorder.exited()).signal, 'SIGKILL', 'the recorder was killed')
  await until('more signals accepted with no recorder', async () => accepted.size >= 600)
  pushing = false
  await Promise.all(pushers)

  // Its lease lapses 15 s after the last renewal: until then a new recorder is refused.
  let again: LaunchedGateway | undefined
  await until(
    'a recorder started again took the lease',
    async () => (again = await startTestGateway(t, { env: recorderEnv, adminToken, dataDir: recorder.dataDir }).catch(() => undefined)) !== undefined,
    40_000,
  )
  await until('the recorder caught up', async () => (await recorderState(again!)).state === 'caught_up', 45_000)
  t.match(await again!.stop(), /code 0/)

  const rows = await recorderRows(receipts['CLICKHOUSE_URL'] ?? join(recorder.dataDir, 'clickhouse'), src.sourceId)
  t.same([...accepted].filter((id) => !rows.has(id)), [], `every one of the ${accepted.size} 202ed signals has a receipt`)
  t.same([...rows].filter(([, n]) => n !== 1), [], 'no receipt was written twice')
})
