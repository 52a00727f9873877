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
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * The service on NATS (NATS_URL), through the built process and a real nats-server: the
 * start-time rules of a process on NATS, and the recorder, which runs on JetStream and
 * NATS KV under a lease that only one recorder of the cluster holds.
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

t.test('a gateway on NATS stops the start with EX_CONFIG: the shared ingest state is not in this release', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-nats-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  for (const role of ['gateway', 'all']) {
    const run = await startToExit({ NATS_URL: nats.urls, ROLE: role, ADMIN_TOKEN: adminToken, DATA_DIR: dir, PORT: '0' })
    t.equal(run.status, 78, `ROLE=${role}`)
    t.match(run.stderr, `ROLE=${role} with NATS_URL: the ingest state shared by the gateways of a cluster`)
  }
})

t.test('a recorder on NATS starts ready; a second one on the same NATS is refused, naming the first', async (t) => {
  const env = { NATS_URL: nats.urls, ROLE: 'recorder', ADMIN_TOKEN: adminToken }
  const first = await startTestGateway(t, { env, adminToken })
  t.equal((await fetch(`${first.url}/readyz`)).status, 200, 'ready')
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
