import { randomBytes } from 'node:crypto'
import { launchGateway, type LaunchedGateway } from './gateway-launcher.js'
import { requireNatsServer, startNatsServer, type NatsCluster } from './nats-launcher.js'

/**
 * `npm run cluster`: a cluster on this machine's loopback, to try the roles apart. One
 * nats-server with JetStream, two gateways, the recorder and a delivery process, each
 * with a data folder of its own under the system's temporary folder and one generated
 * admin token. It prints where each listens and stops everything on Ctrl-C (or SIGTERM),
 * deleting the data folders. Not for production: one NATS server, R1 streams.
 */

const ROLES = [
  { name: 'gateway 1', role: 'gateway' },
  { name: 'gateway 2', role: 'gateway' },
  { name: 'recorder', role: 'recorder' },
  { name: 'delivery', role: 'delivery' },
] as const

async function main(): Promise<void> {
  try {
    requireNatsServer()
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`)
    process.exit(1)
  }
  const nats: NatsCluster = await startNatsServer()
  const adminToken = randomBytes(24).toString('hex')
  const started: { name: string; gw: LaunchedGateway }[] = []
  let stopping = false
  const stop = async (code: number) => {
    if (stopping) return
    stopping = true
    // The launcher does not hold the event loop open for its processes (the tests must be
    // able to end): this does, until every process has stopped.
    const holdOpen = setInterval(() => undefined, 1000)
    process.stdout.write('\nstopping...\n')
    // Gateways first, so nothing new is accepted while the recorder and delivery drain.
    for (const { name, gw } of started) {
      const how = await gw.stop()
      process.stdout.write(`  ${name}: ${how}\n`)
      // What a process that did not stop cleanly said last.
      if (!how.startsWith('code 0')) for (const line of gw.output.slice(-5)) process.stdout.write(`    ${line.slice(0, 400)}\n`)
      await gw.removeDataDir()
    }
    await nats.close()
    clearInterval(holdOpen)
    process.exit(code)
  }
  process.on('SIGINT', () => void stop(0))
  process.on('SIGTERM', () => void stop(0))
  try {
    for (const { name, role } of ROLES) {
      // One at a time: the first creates the streams and buckets the others then find.
      const gw = await launchGateway({ adminToken, outputLines: 200, env: { NATS_URL: nats.urls, ROLE: role, LOG_LEVEL: 'info' } })
      started.push({ name, gw })
    }
  } catch (err) {
    process.stderr.write(`the cluster did not start: ${(err as Error).message}\n`)
    await stop(1)
    return
  }
  const url = (name: string) => started.find((s) => s.name === name)!.gw.url
  const lines = [
    `nats-server     ${nats.urls}`,
    ...started.map(({ name, gw }) => `${name.padEnd(15)} ${gw.url}   (pid ${gw.pid}, DATA_DIR ${gw.dataDir})`),
    '',
    `ADMIN_TOKEN     ${adminToken}`,
    '',
    `Ingest and the control plane go to either gateway (${url('gateway 1')} or ${url('gateway 2')});`,
    `event streams, polling and webhooks to the delivery process (${url('delivery')});`,
    `receipt reads, exports, usage and source status to the recorder (${url('recorder')}).`,
    'A path sent to a process that does not serve it is answered 421, naming the role that does.',
    '',
    'Ctrl-C stops every process and deletes their data folders.',
  ]
  process.stdout.write(`${lines.join('\n')}\n`)
}

await main()
