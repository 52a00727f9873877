import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import t from 'tap'
import { GATEWAY_MAIN, launchGateway } from '../../harness/gateway-launcher.js'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { call, MANIFEST, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * The service on NATS (NATS_URL), through the built process and a real nats-server: the
 * start-time rules of a process on NATS, gateways sharing the ingest state, and the
 * recorder, which runs on JetStream and NATS KV under a lease that only one recorder of the
 * cluster holds.
 */

const nats = await startNatsServer()
t.teardown(() => nats.close())
const adminToken = randomBytes(24).toString('hex')

/** Runs the service to its exit, with only `env` (and PATH) set. */
function startToExit(env: Record<string, string>): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [GATEWAY_MAIN], { env: { PATH: process.env['PATH'], ...env }, stdio: ['ignore', 'ignore', 'pipe'], timeout: 30_000 })
    let stderr = ''
    proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    proc.once('close', (status) => resolve({ status, stderr }))
  })
}

t.test('NATS_URL without ADMIN_TOKEN stops the start with EX_CONFIG naming ADMIN_TOKEN', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-nats-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const run = await startToExit({ NATS_URL: nats.urls, ROLE: 'recorder', DATA_DIR: dir, PORT: '0' })
  t.equal(run.status, 78)
  t.match(run.stderr, /NATS_URL is set but ADMIN_TOKEN is not/)
})

t.test('two gateways on one NATS share the ingest state: a nonce is spent on both, a signal is accepted once, a revocation holds on both', async (t) => {
  const env = { NATS_URL: nats.urls, ROLE: 'gateway', ADMIN_TOKEN: adminToken }
  const [a, b] = await Promise.all([startTestGateway(t, { env, adminToken }), startTestGateway(t, { env, adminToken })])
  // Provisioned through A: the registry is on NATS KV, so B knows the source and key too.
  const src = await provision(a)
  const signed = src.sign(payload(src.sourceId))
  const first = await push(a, signed)
  t.equal(first.status, 202, 'accepted on A')
  const replayed = await push(b, signed)
  t.equal(replayed.status, 401, 'the same request (same nonce) on B')
  t.equal(replayed.body.error.code, 'replayed_nonce', 'the nonce A claimed is spent on B too')
  const retry = await push(b, src.sign(JSON.parse(signed.body.toString())))
  t.equal(retry.status, 202, 'a retry of the signal with a fresh nonce, on B')
  t.equal(retry.body.deduplicated, true, "B recognises A's signal")
  t.equal(retry.body.received_at, first.body.received_at, "and answers with A's receipt time")
  // The signal went into the one log once, whichever gateway answered.
  const nc = await connect({ servers: nats.urls })
  t.teardown(() => nc.close())
  const stream = await (await jetstreamManager(nc)).streams.info('SIGNALS')
  t.equal(stream.state.messages, 2, "the log holds the source's test signal and this one: the retry added nothing")

  // Revoked through A; B refuses the key from then on.
  const revoked = await call(a.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}/revoke`, { token: src.creatorToken })
  t.equal(revoked.status, 200)
  const after = await push(b, src.sign(payload(src.sourceId)))
  t.equal(after.status, 401, 'a push under the revoked key, on B')
  t.equal(after.body.error.code, 'revoked_key')

  // One token bucket per source over both gateways: a burst of 6 (the test signal took one)
  // pushed through both at once admits 5, as one gateway would.
  const limited = await provision(a, { manifest: { ...MANIFEST, max_rate: { rate: 1, per: 'hour', burst: 6 } } })
  const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => push(i % 2 === 0 ? a : b, limited.sign(payload(limited.sourceId)))))
  const statuses = burst.map((r) => r.status)
  t.equal(statuses.filter((s) => s === 202).length, 5, `the burst's tokens, once over both gateways: ${statuses.join(' ')}`)
  t.equal(statuses.filter((s) => s === 429).length, 7)
  // A lower max_rate, acknowledged by A, holds on B at once.
  const fresh = await provision(a, { manifest: { ...MANIFEST, max_rate: { rate: 1, per: 'hour', burst: 100 } } })
  t.equal((await push(b, fresh.sign(payload(fresh.sourceId)))).status, 202)
  const lowered = await call(a.url, 'PATCH', `/v1/byo/sources/${fresh.sourceId}`, { token: fresh.creatorToken, body: { manifest: { ...MANIFEST, max_rate: { rate: 1, per: 'hour', burst: 1 } } } })
  t.equal(lowered.status, 200)
  t.equal((await push(b, fresh.sign(payload(fresh.sourceId)))).status, 202, 'the bucket cut to the new burst: one token left')
  const overLowered = await push(b, fresh.sign(payload(fresh.sourceId)))
  t.equal(overLowered.status, 429, 'B holds the source to the burst of 1 A acknowledged, not the 100 before')
  t.equal(overLowered.body.error.code, 'rate_limited')

  // The receipt store is this cluster's recorder's (embedded): a gateway sends receipt reads there.
  const receipts = await call(a.url, 'GET', '/v1/byo/receipts', { token: src.creatorToken })
  t.equal(receipts.status, 421, 'receipt reads on a gateway of a cluster without a ClickHouse server')
  t.match(receipts.body.error.message, /served by processes with ROLE=recorder or ROLE=all/)
})

t.test('ROLE=all on NATS starts ready and takes signals', async (t) => {
  // A server of its own: its recorder would otherwise hold the lease the recorder test takes.
  const own = await startNatsServer()
  t.teardown(() => own.close())
  const env = { NATS_URL: own.urls, ROLE: 'all', ADMIN_TOKEN: adminToken }
  const gw = await startTestGateway(t, { env, adminToken })
  t.equal((await fetch(`${gw.url}/readyz`)).status, 200, 'ready')
  const src = await provision(gw)
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202)
})

t.test('a recorder on NATS starts ready; a second one on the same NATS is refused, naming the first', async (t) => {
  const env = { NATS_URL: nats.urls, ROLE: 'recorder', ADMIN_TOKEN: adminToken }
  const first = await startTestGateway(t, { env, adminToken })
  t.equal((await fetch(`${first.url}/readyz`)).status, 200, 'ready')
  const status = await call(first.url, 'GET', '/v1/byo/sources/src_none/status', {})
  t.same([status.status, status.body.error.code], [404, 'not_found'], 'the recorder serves the receipt routes (a source status, here of no source)')
  t.equal((await call(first.url, 'GET', '/v1/admin/tokens', { token: adminToken })).status, 421, 'and not the control plane')
  const nc = await connect({ servers: nats.urls })
  t.teardown(() => nc.close())
  const consumer = await (await jetstreamManager(nc)).consumers.info('SIGNALS', 'recorder')
  t.equal(consumer.config.durable_name, 'recorder', "the recorder's durable consumer is on the JetStream stream SIGNALS")
  await t.rejects(launchGateway({ env, adminToken }), /consumer recorder is held by [^ ]+\/\d+\/\d+/)
})

t.test('delivery processes on NATS start ready, each following the log with a consumer of its own', async (t) => {
  const env = { NATS_URL: nats.urls, ROLE: 'delivery', ADMIN_TOKEN: adminToken }
  const [a, b] = await Promise.all([startTestGateway(t, { env, adminToken }), startTestGateway(t, { env, adminToken })])
  for (const gw of [a, b]) t.equal((await fetch(`${gw.url}/readyz`)).status, 200, 'ready')
  const nc = await connect({ servers: nats.urls })
  t.teardown(() => nc.close())
  const names: string[] = []
  for await (const info of (await jetstreamManager(nc)).consumers.list('SIGNALS')) if (info.name.startsWith('delivery-live')) names.push(info.name)
  t.equal(names.length, 2, `two tails, not one shared (whose records the processes would split): ${names.join(', ')}`)
})
