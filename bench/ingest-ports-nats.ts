/**
 * Nonce claims, signal-index checks and rate tokens per second against one real nats-server, with
 * `IN_FLIGHT` operations outstanding (default 256), client and server on this machine.
 * Run: npx tsx bench/ingest-ports-nats.ts [seconds]
 */
import { createHash } from 'node:crypto'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import { startNatsServer } from '../harness/nats-launcher.js'
import { composeNatsIngest } from '../pipeline/ingest/nats/nats-ingest.js'

const SECONDS = Number(process.argv[2] ?? 5)
const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 256)

async function rate(what: string, op: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0
  let done = 0
  const end = Date.now() + SECONDS * 1000
  const started = Date.now()
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (Date.now() < end) {
      await op(next++)
      done++
    }
  }))
  const s = (Date.now() - started) / 1000
  console.log(`${what}: ${Math.round(done / s)}/s (${done} in ${s.toFixed(1)} s, ${IN_FLIGHT} in flight)`)
}

const server = await startNatsServer()
const nc = await connect({ servers: server.nodes[0]!.url })
try {
  const ingest = await composeNatsIngest({
    nc, name: 'bench', nonceWindowMs: 600_000, maxLiveNonces: 10_000_000, dedupWindowMs: 1_800_000, signalRetainMs: 1_800_000,
    maxSignalEntries: 10_000_000, signalPartitions: 4, refusalsPerSource: 100, maxRefusals: 100_000, flagAfterMinutes: 5, maxSources: 100_000, onWarning: (m) => console.error(m),
  })
  // The machine's floor: plain publishes to a stream without expectations, for comparison.
  const js = jetstream(nc)
  await jetstreamManager(nc).then((jsm) => jsm.streams.add({ name: 'floor', subjects: ['floor.*'] }))
  await rate('plain publishes (floor)', (i) => js.publish(`floor.${i % 1000}`, 'x'))
  await rate('nonce claims', (i) => ingest.ports.nonces.claim({ sourceId: `src_${i % 100}`, keyId: 'key_1', nonce: `n-${i}`, now: Date.now(), sourceCap: 1e9 }))
  const sha = createHash('sha256').update('body').digest('hex')
  await rate('index checks (new, then accepted)', async (i) => {
    const check = await ingest.ports.signals.check({ sourceId: `src_${i % 100}`, signalId: `sig_${i}`, idempotencyKey: undefined, bodySha256: sha, now: Date.now(), keyId: 'key_1', claimedNonce: undefined, receivedAtMs: Date.now() })
    if (check.kind !== 'new') throw new Error(`unexpected ${check.kind}`)
    await check.reservation.accepted({ bodySha256: sha, signalId: `sig_${i}`, receivedAtMs: Date.now(), test: false }, { seq: i, duplicate: false }, Date.now())
    check.reservation.release()
  })
  await rate('index checks (replays)', async (i) => {
    const check = await ingest.ports.signals.check({ sourceId: `src_${i % 100}`, signalId: `sig_${i % 1000}`, idempotencyKey: undefined, bodySha256: sha, now: Date.now(), keyId: 'key_1', claimedNonce: undefined, receivedAtMs: Date.now() })
    if (check.kind !== 'replay') throw new Error(`unexpected ${check.kind}`)
  })
  const fast = { rate: 1_000_000, per: 'second' as const }
  await rate('rate tokens (100 sources)', (i) => ingest.ports.rates.take(`src_${i % 100}`, fast, Date.now()))
  await rate('rate tokens (one source)', () => ingest.ports.rates.take('src_one', fast, Date.now()))
  await ingest.close()
} finally {
  await nc.close()
  await server.close()
}
