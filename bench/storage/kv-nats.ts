/**
 * The NATS KV adapter's rates against a nats-server started here (client and server on
 * the same machine, so the rates are floors): create, get and update one at a time and
 * 256 in flight, the latency from a put on one connection to the watch of another, and
 * loading a bucket through a watch. The NATS KV client used directly on the same server
 * in the same run is the ceiling the adapter is compared with.
 * Run: `npx tsx bench/storage/kv-nats.ts` (needs nats-server on PATH).
 */
import { cpus } from 'node:os'
import { jetstream } from '@nats-io/jetstream'
import { Kvm } from '@nats-io/kv'
import { connect } from '@nats-io/transport-node'
import { startNatsServer, requireNatsServer } from '../../harness/nats-launcher.js'
import { natsKvBuckets, type KvBucket } from '../../storage/index.js'

const SERIAL = 3000
const PARALLEL = 20_000
const IN_FLIGHT = 256
const value = new Uint8Array(200).fill(0x61)

async function rate(label: string, n: number, inFlight: number, op: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0
  const t0 = performance.now()
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < n) await op(next++)
  }))
  const s = (performance.now() - t0) / 1000
  console.log(`${label.padEnd(38)} ${Math.round(n / s).toLocaleString('en').padStart(8)} ops/s  (${n} in ${s.toFixed(2)} s)`)
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!.toFixed(2)

/** Puts on `a` carrying their send time; the time until `b`'s watch hands each out. */
async function watchLatency(a: KvBucket, b: KvBucket, label: string, paceMs: number, n: number, prefix: string): Promise<void> {
  const lat: number[] = []
  const watch = b.watch({ include: 'updates_only' })
  await watch.initialized
  const done = (async () => {
    for await (const e of watch) {
      lat.push(performance.now() - new DataView(e.value.buffer, e.value.byteOffset, 8).getFloat64(0))
      if (lat.length >= n) break
    }
  })()
  const inFlight = new Set<Promise<number>>()
  for (let i = 0; i < n; i++) {
    const v = new Uint8Array(200)
    new DataView(v.buffer).setFloat64(0, performance.now())
    // A key per put: the stream keeps only a key's last change, and a watch behind it would skip the others.
    const p = a.put(`${prefix}${i}`, v)
    inFlight.add(p)
    void p.finally(() => inFlight.delete(p))
    if (paceMs > 0) await new Promise((r) => setTimeout(r, paceMs))
    else if (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight)
  }
  await done
  lat.sort((x, y) => x - y)
  console.log(`${label.padEnd(38)} p50 ${pct(lat, 0.5)} ms  p99 ${pct(lat, 0.99)} ms  (${lat.length} puts)`)
}

const version = requireNatsServer()
console.log(`node ${process.version}, ${version}, ${cpus().length} cores (${cpus()[0]?.model})`)
const server = await startNatsServer()
const nc1 = await connect({ servers: server.nodes[0]!.url })
const nc2 = await connect({ servers: server.nodes[0]!.url })
try {
  const limits = { maxKeys: 1_000_000, maxValueBytes: 1024 }
  const a = await natsKvBuckets(nc1)('bench', limits)
  const b = await natsKvBuckets(nc2)('bench', limits)
  const raw = await new Kvm(jetstream(nc1)).create('ceiling', { history: 1, allow_direct: false })
  await rate('ceiling: client create, one at a time', SERIAL, 1, (i) => raw.create(`s${i}`, value))
  await rate(`ceiling: client put, ${IN_FLIGHT} in flight`, PARALLEL, IN_FLIGHT, (i) => raw.put(`p${i}`, value))
  await rate(`ceiling: client get, ${IN_FLIGHT} in flight`, PARALLEL, IN_FLIGHT, (i) => raw.get(`p${i}`))
  const revs: number[] = []
  await rate('create, one at a time', SERIAL, 1, async (i) => (revs[i] = await a.create(`s${i}`, value)))
  await rate('get, one at a time', SERIAL, 1, (i) => a.get(`s${i}`))
  await rate('update, one at a time', SERIAL, 1, async (i) => (revs[i] = await a.update(`s${i}`, value, revs[i]!)))
  await rate(`create, ${IN_FLIGHT} in flight`, PARALLEL, IN_FLIGHT, async (i) => (revs[i] = await a.create(`p${i}`, value)))
  await rate(`get, ${IN_FLIGHT} in flight`, PARALLEL, IN_FLIGHT, (i) => a.get(`p${i}`))
  await rate(`update, ${IN_FLIGHT} in flight`, PARALLEL, IN_FLIGHT, async (i) => (revs[i] = await a.update(`p${i}`, value, revs[i]!)))
  await rate(`put, ${IN_FLIGHT} in flight`, PARALLEL, IN_FLIGHT, (i) => a.put(`p${i}`, value))
  await watchLatency(a, b, 'watch latency, one put every ms', 1, 1000, 'w')
  await watchLatency(a, b, 'watch latency, 256 puts in flight', 0, 20_000, 'x')
  const t0 = performance.now()
  const c = await natsKvBuckets(nc2)('bench', limits)
  const w = c.watch()
  let n = 0
  const it = w[Symbol.asyncIterator]()
  const loading = (async () => { while (!(await it.next()).done) n++ })()
  await w.initialized
  console.log(`open + last_values watch of ${n.toLocaleString('en')} keys: ${(performance.now() - t0).toFixed(0)} ms`)
  w.stop()
  await loading
  await Promise.all([a.close(), b.close(), c.close()])
} finally {
  await nc1.close()
  await nc2.close()
  await server.close()
}
