/**
 * Accepts per second of the ingest pipeline alone, in one process: everything after the
 * edge (nonce claim, dedup, field validation, rate limit, append, dedup entry) with a
 * verifier that passes every request at once and a journal that does not fsync, so what
 * is timed is the pipeline's own work and its state, not Ed25519 or the disk.
 *
 *   node dist/bench/ingest-pipeline-throughput.js [signals] [--in-flight=N] [--json]
 *
 * Three phases over `signals` requests each, `in-flight` at a time: new signals, retries of
 * them with fresh nonces (deduplicated 202s), and replays of their nonces (401s).
 */
import { createHash, generateKeyPairSync } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { argv } from 'node:process'
import { pathToFileURL } from 'node:url'
import { composeEmbeddedIngest, openJournal, SignalIdHistory, type SignedRequest, type VerifyPool } from '../pipeline/index.js'
import { Registry } from '../registry/index.js'
import { fileKvBuckets } from '../storage/index.js'

const MANIFEST = {
  archetype: 'wallet-watcher',
  schema_version: '1.0',
  severity_levels: ['info', 'warning', 'critical'],
  max_rate: { rate: 1_000_000, per: 'second', burst: 1_000_000 },
  coverage: { chains: ['solana'], wallet_set_size: 250 },
  contact: 'ops@example.com',
}

export interface PhaseFigure {
  readonly requests: number
  readonly perSecond: number
  /** CPU time (user + system, all threads) per request: steadier than the rate on a shared machine. */
  readonly cpuUsPerRequest: number
  readonly answers: Record<string, number>
}

export async function ingestPipelineThroughput(signals: number, inFlight: number): Promise<Record<string, PhaseFigure>> {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-bench-pipeline-'))
  const log = await openJournal({ dir: join(dir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  // The registry is written a handful of times before the phases start: its disk is not timed.
  const registryBucket = await fileKvBuckets({ dir: join(dir, 'kv') })('registry', Registry.bucketLimits())
  const registry = await Registry.open(registryBucket, 'admin')
  try {
    const agent = await registry.createAgent({ agent_id: 'a', creator_id: 'c', slots: 1 })
    const source = await registry.createSource({ agent, manifest: structuredClone(MANIFEST) as never, listing: { public_receipts: false } })
    const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
    const keyRecord = await registry.addKey(source.source_id, raw)
    await registry.markTested(source.source_id, keyRecord.key_id)
    await registry.promoteKey(source.source_id, keyRecord.key_id)
    const key = registry.key(source.source_id, keyRecord.key_id)
    if (key === undefined) throw new Error('the key was not registered')
    const history = await SignalIdHistory.open({ dir: join(dir, 'signal-ids'), maxEntries: 4 * signals, log, onWarning: () => undefined })
    const ingest = composeEmbeddedIngest({
      log,
      pool: { verify: async () => true } as unknown as VerifyPool,
      registry,
      now: Date.now,
      nonceWindowMs: 600_000,
      maxLiveNonces: 12 * signals + 10_000,
      dedupWindowMs: 1_800_000,
      maxDedupEntries: 4 * signals + 10_000,
      appendQueueLimit: inFlight * 2,
      history,
      flagAfterMinutes: 5,
      rateCeiling: { perSecond: 1_000_000, burst: 1_000_000 },
      onLogFailure: (err) => {
        throw err
      },
      onWarning: () => undefined,
    })
    await ingest.recover()
    const { pipeline } = ingest
    const now = Date.now()
    const timestampHeader = new Date(now).toISOString()
    const bodies = Array.from({ length: signals }, (_, i) => {
      const body = Buffer.from(
        JSON.stringify({ signal_id: `sig_bench_${i}`, source_id: source.source_id, ts: timestampHeader, token: 'So11111111111111111111111111111111111111112', severity: 'warning', confidence: 80, note: 'bench' }),
      )
      return { body, bodySha256: createHash('sha256').update(body).digest('hex'), json: { ok: true as const, value: JSON.parse(body.toString()) as unknown } }
    })
    const request = (i: number, nonce: string): SignedRequest => ({
      requestId: `req_${i}`,
      receivedAtMs: Date.now(),
      method: 'POST',
      path: `/v1/byo/sources/${source.source_id}/signals`,
      source,
      verifyHolder: source.source_id,
      key,
      timestampHeader,
      requestTimeMs: now,
      nonce,
      signature: Buffer.alloc(64),
      idempotencyKey: undefined,
      idempotencyKeyCount: 0,
      ...(bodies[i] as (typeof bodies)[number]),
      nonceClaimed: false,
    })
    const phase = async (nonceOf: (i: number) => string): Promise<PhaseFigure> => {
      const answers: Record<string, number> = {}
      const count = (answer: string) => (answers[answer] = (answers[answer] ?? 0) + 1)
      let next = 0
      const lane = async () => {
        while (next < signals) {
          const i = next++
          await pipeline.process(request(i, nonceOf(i))).then(
            (a) => count(a.deduplicated ? '202 deduplicated' : '202'),
            (err: { code?: string }) => count(err.code ?? 'error'),
          )
        }
      }
      const cpu = process.cpuUsage()
      const start = performance.now()
      await Promise.all(Array.from({ length: inFlight }, lane))
      const ms = performance.now() - start
      const used = process.cpuUsage(cpu)
      return { requests: signals, perSecond: Math.round((signals / ms) * 1000), cpuUsPerRequest: (used.user + used.system) / signals, answers }
    }
    const figures = {
      'new signals': await phase((i) => `nonce-a-${i}`),
      'retries (deduplicated)': await phase((i) => `nonce-b-${i}`),
      'replayed nonces': await phase((i) => `nonce-b-${i}`),
    }
    await history.close()
    return figures
  } finally {
    await registry.close()
    await registryBucket.close()
    await log.close()
    await rm(dir, { recursive: true, force: true })
  }
}

if (import.meta.url === pathToFileURL(argv[1] ?? '').href) {
  const signals = Number(argv.slice(2).find((a) => /^[0-9]+$/.test(a)) ?? 50_000)
  const inFlight = Number(/^--in-flight=([0-9]+)$/.exec(argv.find((a) => a.startsWith('--in-flight=')) ?? '')?.[1] ?? 256)
  const figures = await ingestPipelineThroughput(signals, inFlight)
  if (argv.includes('--json')) console.log(JSON.stringify(figures))
  else {
    console.log(`node ${process.version}, ${signals} requests per phase, ${inFlight} in flight`)
    for (const [name, f] of Object.entries(figures)) console.log(`  ${name.padEnd(24)} ${String(f.perSecond).padStart(8)} /s  ${f.cpuUsPerRequest.toFixed(1).padStart(6)} µs CPU/request  ${JSON.stringify(f.answers)}`)
  }
}
