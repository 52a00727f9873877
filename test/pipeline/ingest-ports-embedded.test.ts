import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { EmbeddedNonceClaims } from '../../pipeline/ingest/embedded/nonce-claims.js'
import { NonceStore } from '../../pipeline/ingest/embedded/nonce-store.js'
import { LocalRateBuckets } from '../../pipeline/ingest/embedded/rate-buckets.js'
import { EmbeddedRevocationBarrier } from '../../pipeline/ingest/embedded/revocation-barrier.js'
import { KvRateBuckets } from '../../pipeline/ingest/nats/rate-buckets.js'
import { fileKvBuckets } from '../../storage/index.js'
import { SignalDedup } from '../../pipeline/ingest/embedded/signal-dedup.js'
import { EmbeddedSignalIndex } from '../../pipeline/ingest/embedded/signal-index.js'
import { EmbeddedRefusalHistory, openJournal, SignalIdHistory } from '../../pipeline/index.js'
import { nonceClaimsContract } from '../contracts/nonce-claims-contract.js'
import { rateBucketsContract } from '../contracts/rate-buckets-contract.js'
import { refusalHistoryContract } from '../contracts/refusal-history-contract.js'
import { revocationBarrierContract } from '../contracts/revocation-barrier-contract.js'
import { signalIndexContract } from '../contracts/signal-index-contract.js'
import type { TapTest } from '../contracts/kv-contract.js'

// The embedded adapters of the ingest ports, each run through its port's contract. One
// process is one gateway: the two views a contract asks for are the same adapter.

async function folder(t: TapTest): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-ingest-ports-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

nonceClaimsContract(t, 'embedded', async (_t, { windowMs }) => {
  const store = new NonceStore({ windowMs, maxEntries: 100_000, initialCapacity: 1024 })
  const claims = new EmbeddedNonceClaims(() => store)
  return { a: claims, b: claims }
})

rateBucketsContract(t, 'embedded', async (_t, { flagAfterMinutes }) => {
  const rates = new LocalRateBuckets({ flagAfterMinutes })
  return { a: rates, b: rates }
})

// The shared adapter on the file bucket: two adapters, each with its own view of the
// bucket, race as two gateways would (the NATS run is in ingest-ports-nats.test.ts).
rateBucketsContract(t, 'shared buckets on a file bucket', async (t, { flagAfterMinutes }) => {
  const bucket = await fileKvBuckets({ dir: await folder(t) })('rates', KvRateBuckets.bucketLimits(1000))
  t.teardown(() => bucket.close())
  const open = () => new KvRateBuckets(bucket, { flagAfterMinutes, onWarning: (m, err) => t.fail(`${m}: ${String(err)}`) })
  return { a: open(), b: open() }
})

signalIndexContract(t, 'embedded', async (t, { dedupWindowMs }) => {
  const dir = await folder(t)
  const log = await openJournal({ dir: join(dir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  const history = await SignalIdHistory.open({ dir: join(dir, 'signal-ids'), maxEntries: 10_000, log, onWarning: (m) => t.fail(m) })
  t.teardown(async () => {
    await history.close()
    await log.close()
  })
  const dedup = new SignalDedup({ windowMs: dedupWindowMs, maxEntries: 100_000, initialCapacity: 1024 })
  const index = new EmbeddedSignalIndex({ dedup: () => dedup, history, onAppendRefused: () => undefined })
  return { a: index, b: index }
})

refusalHistoryContract(t, 'embedded', async (t, { perSource }) => {
  const dir = await folder(t)
  const history = await EmbeddedRefusalHistory.open(dir, {
    perSource,
    maxUnverified: 100_000,
    nonceSinceMs: 0,
    onWriteError: (err) => t.fail(String(err)),
    onWarning: (m) => t.fail(m),
  })
  t.teardown(() => history.close())
  return { a: history, b: history }
})

revocationBarrierContract(t, 'embedded', async () => {
  const barrier = new EmbeddedRevocationBarrier()
  return { a: barrier, b: barrier }
})
