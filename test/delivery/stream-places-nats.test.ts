import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { KvStreamPlaces, placesBucketLimits, STREAM_PLACE_TIMING } from '../../delivery/index.js'
import { streamPlacesContract } from '../contracts/stream-places-contract.js'
import { natsKvServer } from '../helpers/nats-kv.js'

/**
 * The places of open event streams on NATS KV pass the contract the memory and file-backed
 * adapters pass, each view on a connection of its own, as processes of a cluster are.
 */
const nats = await natsKvServer(t)

streamPlacesContract(t, 'kv (nats)', async (t, max, now) => {
  const dir = await mkdtemp(join(tmpdir(), 'stream-places-'))
  const buckets: Awaited<ReturnType<ReturnType<typeof nats.bucketsOn>>>[] = []
  t.teardown(async () => {
    for (const b of buckets) await b.close()
    await rm(dir, { recursive: true, force: true })
  })
  const connections = await Promise.all([nats.connect(), nats.connect()])
  for (const nc of connections) buckets.push(await nats.bucketsOn(nc, dir)('stream-places', placesBucketLimits(1000, max)))
  let views = 0
  return {
    // Each view on the next connection in turn.
    view: () => new KvStreamPlaces({ bucket: buckets[views++ % 2]!, max, holder: `nats-test/${process.pid}/view${views}`, now }),
    expireMs: STREAM_PLACE_TIMING.expireMs,
  }
})
