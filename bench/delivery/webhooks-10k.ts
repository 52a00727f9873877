import { setTimeout as sleep } from 'node:timers/promises'
import { apiRequest } from '../../harness/api-request.js'
import { freePort, launchGateway } from '../../harness/gateway-launcher.js'
import { startBenchGateway, type BenchGateway } from '../ingest/gateway-process.js'
import { ProcessSampler } from '../ingest/process-sampler.js'
import { Pusher } from './pusher.js'
import { SharedReceiver } from './receivers.js'
import { benchSources, type BenchSource } from './setup.js'
import { vmRssKb, waitFor } from './wait-and-rss.js'

/**
 * Webhooks at scale, on a gateway of its own: `rentals` rentals with webhooks over
 * `sources` sources (rental i on source i mod sources, so each signal reaches
 * rentals / sources endpoints), the endpoints spread over `receivers` local servers.
 * Measures the gateway's RSS and idle CPU with them all registered, deliveries/s when
 * `signals` are pushed round-robin over every source (each endpoint gets
 * signals / sources of them), then a restart on the same data: time to ready, RSS, idle
 * CPU and a second round of deliveries.
 */

export interface ScaleResult {
  rentals: number
  sources: number
  receivers: number
  setupSeconds: number
  rssBeforeWebhooksMb: number
  rssWithWebhooksMb: number
  bytesPerWebhookRental: number
  idleCores: number
  signals: number
  expected: number
  delivered: number
  endpointsReached: number
  seconds: number
  gatewayCores: number
  deliveriesPerSecond: number
  restartToReadySeconds: number
  rssAfterRestartMb: number
  idleCoresAfterRestart: number
  afterRestart: { signals: number; expected: number; delivered: number; seconds: number; deliveriesPerSecond: number; gatewayCores: number }
}

/** Lanes of setup requests, and the least number of renters (a renter holds at most 100 open rentals). */
const LANES = 16

const vmRssMb = (pid: number): number => vmRssKb(pid) / 1024

/** Runs `task(i)` for i below `count`, `lanes` at a time. */
async function inLanes(count: number, lanes: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(Array.from({ length: lanes }, async () => {
    while (next < count) await task(next++)
  }))
}

async function idleCores(sampler: ProcessSampler, ms: number): Promise<number> {
  sampler.beginWindow()
  await sleep(ms)
  const u = sampler.endWindow()
  return Number((u.mainCores + u.otherCores).toFixed(3))
}

async function deliver(gw: { url: string }, sampler: ProcessSampler, sources: readonly BenchSource[], receivers: readonly SharedReceiver[], signals: number, perSource: number, tag: string) {
  const before = receivers.reduce((n, r) => n + r.delivered, 0)
  const delivered = () => receivers.reduce((n, r) => n + r.delivered, 0) - before
  const pusher = new Pusher(gw.url, tag)
  sampler.beginWindow()
  const t0 = performance.now()
  await pusher.pushMany(sources, signals)
  pusher.close()
  const expected = pusher.accepted * perSource
  await waitFor(() => delivered() >= expected, 120_000)
  const usage = sampler.endWindow()
  const seconds = (Math.max(...receivers.map((r) => r.lastAt)) - t0) / 1000
  return { signals: pusher.accepted, expected, delivered: delivered(), seconds: Number(seconds.toFixed(2)), deliveriesPerSecond: Math.round(delivered() / seconds), gatewayCores: Number((usage.mainCores + usage.otherCores).toFixed(2)) }
}

export async function webhooksAtScale(options: { rentals: number; sources: number; receivers: number; signals: number; env: Record<string, string>; nodeArgs: string[] }): Promise<ScaleResult> {
  const { rentals, receivers: receiverCount, signals } = options
  const t0 = performance.now()
  let gw: BenchGateway = await startBenchGateway(options.env)
  const receivers = Array.from({ length: receiverCount }, () => new SharedReceiver())
  let sampler = new ProcessSampler(gw.pid)
  try {
    const bases = await Promise.all(receivers.map((r) => r.listen()))
    const sources = await benchSources(gw, 'scale', options.sources)
    // Renters own rentals i mod RENTERS; the control plane serialises rental creation per renter and per source, and answers 503 to retry.
    const RENTERS = Math.max(LANES, Math.ceil(rentals / 100))
    const renterTokens: string[] = []
    for (let k = 0; k < RENTERS; k++) {
      const token = await apiRequest(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: `renter:bench_scale_${k}` } })
      if (token.status !== 201) throw new Error(`renter token: ${token.status}`)
      renterTokens.push(token.body.data.token as string)
    }
    const rentalIds: string[] = new Array(rentals)
    await inLanes(rentals, LANES, async (i) => {
      for (let tries = 0; ; tries++) {
        const res = await apiRequest(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, body: { renter_id: `renter:bench_scale_${i % RENTERS}`, source_id: sources[i % sources.length]!.sourceId } })
        if (res.status === 201) {
          rentalIds[i] = res.body.data.rental_id as string
          return
        }
        if (res.status !== 503 || tries > 50) throw new Error(`rental ${i}: ${res.status} ${JSON.stringify(res.body)}`)
        await sleep(5)
      }
    })
    await sleep(2000)
    const rssBefore = vmRssMb(gw.pid)
    await inLanes(rentals, LANES, async (i) => {
      const url = `${bases[i % receiverCount]}/hook/${i}`
      const res = await apiRequest(gw.url, 'PUT', `/v1/rentals/${rentalIds[i]}/webhook`, { token: renterTokens[i % RENTERS]!, body: { url } })
      if (res.status !== 200) throw new Error(`webhook ${i}: ${res.status} ${JSON.stringify(res.body)}`)
    })
    const setupSeconds = (performance.now() - t0) / 1000
    await sleep(3000)
    const rssWith = vmRssMb(gw.pid)
    const idle = await idleCores(sampler, 5000)
    const perSource = rentals / sources.length
    const first = await deliver(gw, sampler, sources, receivers, signals, perSource, 'scale1')
    const endpointsReached = receivers.reduce((n, r) => n + r.perPath.size, 0)

    // A restart on the same data with every webhook registered.
    await gw.stop()
    sampler.stop()
    const r0 = performance.now()
    const env = Object.fromEntries(Object.entries(gw.env).filter(([k]) => !['PATH', 'PORT', 'HOST', 'DATA_DIR', 'ADMIN_TOKEN'].includes(k)))
    const relaunched = await launchGateway({ port: await freePort(), env, nodeArgs: options.nodeArgs, dataDir: gw.dataDir, adminToken: gw.adminToken, outputLines: 50 })
    const restartToReadySeconds = (performance.now() - r0) / 1000
    const removeFirst = gw.removeDataDir
    gw = { ...relaunched, config: gw.config, removeDataDir: removeFirst }
    sampler = new ProcessSampler(gw.pid)
    await sleep(3000)
    const rssAfterRestart = vmRssMb(gw.pid)
    const idleAfter = await idleCores(sampler, 5000)
    const second = await deliver(gw, sampler, sources, receivers, Math.max(sources.length, Math.round(signals / 2)), perSource, 'scale2')
    return {
      rentals,
      sources: sources.length,
      receivers: receiverCount,
      setupSeconds: Number(setupSeconds.toFixed(1)),
      rssBeforeWebhooksMb: Number(rssBefore.toFixed(1)),
      rssWithWebhooksMb: Number(rssWith.toFixed(1)),
      bytesPerWebhookRental: Math.round(((rssWith - rssBefore) * 1024 * 1024) / rentals),
      idleCores: idle,
      ...first,
      endpointsReached,
      restartToReadySeconds: Number(restartToReadySeconds.toFixed(2)),
      rssAfterRestartMb: Number(rssAfterRestart.toFixed(1)),
      idleCoresAfterRestart: idleAfter,
      afterRestart: second,
    }
  } finally {
    sampler.stop()
    await gw.stop()
    await gw.removeDataDir()
    await Promise.all(receivers.map((r) => r.close()))
  }
}
