import { setTimeout as sleep } from 'node:timers/promises'
import { apiRequest } from '../../harness/api-request.js'
import type { BenchGateway } from '../ingest/gateway-process.js'
import { LatencyHistogram } from '../ingest/histogram.js'
import type { ProcessSampler } from '../ingest/process-sampler.js'
import { acceptBuckets, acceptFigures } from './accept-histogram.js'
import { Pusher } from './pusher.js'
import { Receiver } from './receivers.js'
import type { BenchRental, BenchSource } from './setup.js'
import { openDrainStream } from './drain-stream.js'
import { openStream, type OnEvent, type SseStream } from './sse-client.js'
import { vmRssKb, waitFor } from './wait-and-rss.js'

/**
 * The four measurements. Each returns plain figures; a phase that could not finish says
 * why in `notMeasured` instead of a number.
 */

/** `perRental` streams per rental; the first `parsedPerRental` of each rental parsed and handed to `onEvent`, the rest drained unparsed. */
async function openAll(gw: BenchGateway, rentals: readonly BenchRental[], perRental: number, parsedPerRental: number, onEvent: OnEvent, lastEventId?: string, batch = 500): Promise<{ streams: SseStream[]; statuses: Record<string, number> }> {
  const streams: SseStream[] = []
  const statuses: Record<string, number> = {}
  const wanted: [BenchRental, number][] = []
  for (let k = 0; k < perRental; k++) for (const r of rentals) wanted.push([r, k])
  for (let i = 0; i < wanted.length; i += batch) {
    const opened = wanted
      .slice(i, i + batch)
      .map(([r, k]) => (k < parsedPerRental ? openStream(gw.url, r.rentalId, r.renterToken, onEvent, lastEventId) : openDrainStream(gw.url, r.rentalId, r.renterToken, lastEventId)))
    for (const status of await Promise.all(opened.map((s) => s.opened))) statuses[status] = (statuses[status] ?? 0) + 1
    streams.push(...opened)
  }
  return { streams, statuses }
}

export interface LatencyResult {
  subscribers: number
  parsedSubscribers: number
  drainedBytes: number
  statuses: Record<string, number>
  signalsSent: number
  signalsAccepted: number
  rejected: Record<number, number>
  firstRejection: string | null
  pushSeconds: number
  expectedDeliveries: number
  received: number
  disconnected: number
  /** From the gateway's received_at (epoch ms, the gateway's clock) to arrival (the same machine's clock): the headline. */
  acceptToReceive: { p50: number; p99: number; p999: number; max: number }
  sendToReceive: { p50: number; p99: number; p999: number; max: number }
  /** The gateway's own arrival-to-202 over the phase (its /metrics histogram): the ingest part of accept-to-receive. */
  gatewayAcceptTo202: ReturnType<typeof acceptFigures>
  ackToReceive: { p50: number; p99: number; p999: number }
  gatewayCores: number
  gatewayMainThreadCores: number
  /** Gateway CPU time per 1,000 events received (all threads, main thread): less sensitive to the machine's other load than latency. */
  gatewayCpuMsPer1000Events: { all: number; main: number }
  clientCores: number
  gatewayMaxRssMb: number
  lastEventId: number
}

/**
 * `gw` serves the streams and, unless `ingest` names another process (a cluster's gateway,
 * with delivery in a process of its own), takes the pushes; `sampler` follows `gw`.
 */
export async function latencyPhase(gw: BenchGateway, sampler: ProcessSampler, sources: readonly BenchSource[], rentals: readonly BenchRental[], perRental: number, parsedPerRental: number, rate: number, seconds: number, ingest: { readonly url: string; readonly adminToken: string } = gw): Promise<LatencyResult> {
  const pusher = new Pusher(ingest.url, 'lat')
  const fromSend = new LatencyHistogram()
  const fromAck = new LatencyHistogram()
  const fromAccept = new LatencyHistogram()
  // Arrival as epoch ms on the system clock the gateway stamps received_at with; taken once,
  // so the monotonic arrival times convert without a Date.now() per event.
  const epochOffset = Date.now() - performance.now()
  let received = 0
  let lastEventId = 0
  const late: [string, number][] = []
  const onEvent: OnEvent = (eventId, signalId, at, receivedAt) => {
    lastEventId = Math.max(lastEventId, Number.parseInt(eventId, 10) || 0)
    if (signalId === undefined) return
    const sent = pusher.sentAt.get(signalId)
    if (sent === undefined) return
    received++
    fromSend.recordMs(at - sent)
    // received_at is whole milliseconds, rounded down: this reads up to 1 ms high, never low.
    const acceptedAt = receivedAt === undefined ? Number.NaN : Date.parse(receivedAt)
    if (Number.isFinite(acceptedAt)) fromAccept.recordMs(Math.max(0, at + epochOffset - acceptedAt))
    const acked = pusher.ackedAt.get(signalId)
    if (acked !== undefined) fromAck.recordMs(Math.max(0, at - acked))
    else late.push([signalId, at]) // arrived before its 202: 0 ms after the ack
  }
  const { streams, statuses } = await openAll(gw, rentals, perRental, parsedPerRental, onEvent)
  pusher.presign(sources, rate * seconds)
  const open = streams.filter((s) => !s.closedByServer).length
  const perSource = rentals.length / sources.length
  const accept0 = await acceptBuckets(ingest.url, ingest.adminToken)
  sampler.beginWindow()
  const clientCpu0 = process.cpuUsage()
  const t0 = performance.now()
  await pusher.pushAtRate(sources, rate, seconds)
  const pushSeconds = (performance.now() - t0) / 1000
  const expected = pusher.accepted * perSource * parsedPerRental
  await waitFor(() => received >= expected, 15_000)
  const windowSeconds = (performance.now() - t0) / 1000
  const usage = sampler.endWindow()
  // Events out of the gateway: every stream of a rental gets what its parsed ones got.
  const eventsOut = Math.max(1, received * (perRental / parsedPerRental))
  const cpuMsPer1000 = (cores: number) => Number(((cores * windowSeconds * 1e6) / eventsOut).toFixed(1))
  const clientCpu = process.cpuUsage(clientCpu0)
  const gatewayAcceptTo202 = acceptFigures(accept0, await acceptBuckets(ingest.url, ingest.adminToken), 20)
  const drainedBytes = streams.reduce((n, s) => n + ((s as { bytes?: number }).bytes ?? 0), 0)
  for (const _ of late) fromAck.recordMs(0)
  const disconnected = streams.filter((s) => s.closedByServer).length
  for (const s of streams) s.close()
  pusher.close()
  const q = (h: LatencyHistogram, p: number) => Number(h.quantileMs(p).toFixed(2))
  return {
    subscribers: open,
    parsedSubscribers: parsedPerRental * rentals.length,
    drainedBytes,
    statuses,
    signalsSent: rate * seconds,
    signalsAccepted: pusher.accepted,
    rejected: pusher.rejections,
    firstRejection: pusher.firstRejection ?? null,
    pushSeconds: Number(pushSeconds.toFixed(2)),
    expectedDeliveries: expected,
    received,
    disconnected,
    acceptToReceive: { p50: q(fromAccept, 0.5), p99: q(fromAccept, 0.99), p999: q(fromAccept, 0.999), max: Number((fromAccept.maxUs / 1000).toFixed(2)) },
    sendToReceive: { p50: q(fromSend, 0.5), p99: q(fromSend, 0.99), p999: q(fromSend, 0.999), max: Number((fromSend.maxUs / 1000).toFixed(2)) },
    gatewayAcceptTo202,
    ackToReceive: { p50: q(fromAck, 0.5), p99: q(fromAck, 0.99), p999: q(fromAck, 0.999) },
    gatewayCores: Number((usage.mainCores + usage.otherCores).toFixed(2)),
    gatewayMainThreadCores: Number(usage.mainCores.toFixed(2)),
    gatewayCpuMsPer1000Events: { all: cpuMsPer1000(usage.mainCores + usage.otherCores), main: cpuMsPer1000(usage.mainCores) },
    clientCores: Number(((clientCpu.user + clientCpu.system) / 1e6 / ((performance.now() - t0) / 1000)).toFixed(2)),
    gatewayMaxRssMb: Number(usage.maxRssMb.toFixed(1)),
    lastEventId,
  }
}

export interface IdleResult {
  wanted: number
  open: number
  statuses: Record<string, number>
  rssBeforeMb: number
  rssAfterMb: number
  rssAfterCloseMb: number
  bytesPerConnection: number
  openSeconds: number
}

/** Run first, on rentals with no events yet, so the streams stay idle and the heap has not grown from other phases. */
export async function idlePhase(gw: BenchGateway, rentals: readonly BenchRental[], perRental: number): Promise<IdleResult> {
  await sleep(2000)
  const before = vmRssKb(gw.pid)
  const t0 = performance.now()
  const { streams, statuses } = await openAll(gw, rentals, perRental, 0, () => {})
  const openSeconds = (performance.now() - t0) / 1000
  await sleep(3000)
  const open = streams.filter((s) => !s.closedByServer).length
  const after = vmRssKb(gw.pid)
  for (const s of streams) s.close()
  await sleep(3000)
  const afterClose = vmRssKb(gw.pid)
  return {
    rssAfterCloseMb: Number((afterClose / 1024).toFixed(1)),
    wanted: rentals.length * perRental,
    open,
    statuses,
    rssBeforeMb: Number((before / 1024).toFixed(1)),
    rssAfterMb: Number((after / 1024).toFixed(1)),
    bytesPerConnection: open === 0 ? Number.NaN : Math.round(((after - before) * 1024) / open),
    openSeconds: Number(openSeconds.toFixed(2)),
  }
}

export interface ReplayResult {
  behind: number
  received: number
  seconds: number
  eventsPerSecond: number
}

export async function replayPhase(gw: BenchGateway, source: BenchSource, rental: BenchRental, behind: number): Promise<ReplayResult> {
  const pusher = new Pusher(gw.url, 'replay')
  await pusher.pushMany([source], behind)
  pusher.close()
  if (pusher.accepted !== behind) throw new Error(`replay: ${pusher.accepted} of ${behind} signals accepted`)
  let received = 0
  let doneAt = 0
  const t0 = performance.now()
  // "0": resume after log position 0, so everything of the rental, which began just before these signals.
  const stream = openStream(gw.url, rental.rentalId, rental.renterToken, (_id, signalId, at) => {
    if (signalId !== undefined && ++received === behind) doneAt = at
  }, '0')
  if ((await stream.opened) !== 200) throw new Error('replay: stream refused')
  await waitFor(() => received >= behind || stream.closedByServer, 120_000)
  stream.close()
  const seconds = ((doneAt || performance.now()) - t0) / 1000
  return { behind, received, seconds: Number(seconds.toFixed(3)), eventsPerSecond: Math.round(received / seconds) }
}

export interface WebhookResult {
  endpoints: number
  failingEndpoints: number
  signals: number
  rejected: Record<number, number>
  firstRejection: string | null
  expected: number
  delivered: number
  failedAttempts: number
  seconds: number
  pushSeconds: number
  gatewayCores: number
  /** From the first push to the last delivery. */
  deliveriesPerSecond: number
  /** From the first delivery to the last. */
  fromFirstDeliveryPerSecond: number
}

export async function setWebhooks(gw: BenchGateway, rentals: readonly BenchRental[]): Promise<{ receivers: Receiver[]; urls: string[] }> {
  const receivers: Receiver[] = []
  const urls: string[] = []
  for (const r of rentals) {
    const receiver = new Receiver()
    const url = await receiver.listen()
    urls.push(url)
    const res = await apiRequest(gw.url, 'PUT', `/v1/rentals/${r.rentalId}/webhook`, { token: r.renterToken, body: { url } })
    if (res.status !== 200) throw new Error(`webhook: ${res.status} ${JSON.stringify(res.body)}`)
    receivers.push(receiver)
  }
  return { receivers, urls }
}

/** `signals` pushed over `sources`; each reaches rentals/sources endpoints; counts what the healthy receivers got. */
export async function webhookPhase(gw: BenchGateway, sampler: ProcessSampler, sources: readonly BenchSource[], rentals: readonly BenchRental[], receivers: Receiver[], signals: number, failingEvery: number, tag: string): Promise<WebhookResult> {
  receivers.forEach((r, i) => {
    // every 11th (0, 11, ..., 99): one rental of each of 10 sources when rental i is on source i mod 10
    r.failing = failingEvery > 0 && i % failingEvery === 0
    r.delivered = r.failed = r.firstAt = r.lastAt = 0
  })
  const perSource = rentals.length / sources.length
  const healthyEndpoints = receivers.filter((r) => !r.failing).length
  const delivered = () => receivers.reduce((n, r) => n + r.delivered, 0)
  const pusher = new Pusher(gw.url, tag)
  sampler.beginWindow()
  const t0 = performance.now()
  await pusher.pushMany(sources, signals)
  const pushSeconds = (performance.now() - t0) / 1000
  pusher.close()
  // Sources are pushed round-robin, so each healthy endpoint expects accepted / sources.
  const expected = Math.round(pusher.accepted * (healthyEndpoints / rentals.length) * perSource)
  await waitFor(() => delivered() >= expected, 60_000)
  const usage = sampler.endWindow()
  const lastAt = Math.max(...receivers.map((r) => r.lastAt))
  const firstAt = Math.min(...receivers.filter((r) => r.firstAt > 0).map((r) => r.firstAt))
  const seconds = (Math.max(lastAt, t0 + 1) - t0) / 1000
  return {
    endpoints: receivers.length,
    failingEndpoints: receivers.length - healthyEndpoints,
    signals: pusher.accepted,
    rejected: pusher.rejections,
    firstRejection: pusher.firstRejection ?? null,
    expected,
    delivered: delivered(),
    failedAttempts: receivers.reduce((n, r) => n + r.failed, 0),
    seconds: Number(seconds.toFixed(2)),
    pushSeconds: Number(pushSeconds.toFixed(2)),
    gatewayCores: Number((usage.mainCores + usage.otherCores).toFixed(2)),
    deliveriesPerSecond: Math.round(delivered() / seconds),
    fromFirstDeliveryPerSecond: Math.round(delivered() / Math.max(1e-3, (lastAt - firstAt) / 1000)),
  }
}

/**
 * The ceiling the webhook figures are read against, measured in the same run: signed-size
 * POSTs from this process straight to the same receivers (one keep-alive connection each,
 * as the gateway holds), as fast as they answer, for `ms`. What the machine's share gives
 * the HTTP exchange alone; the gateway's rate divided by it is what is left for signing,
 * state and the log.
 */
export async function receiverCeiling(urls: readonly string[], ms: number): Promise<{ postsPerSecond: number; seconds: number }> {
  const { Agent, request } = await import('node:http')
  const body = Buffer.alloc(420, 'x')
  let posts = 0
  const t0 = performance.now()
  const end = t0 + ms
  await Promise.all(urls.map(async (url, i) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const u = new URL(url)
    while (performance.now() < end) {
      await new Promise<void>((resolve) => {
        const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent, headers: { 'content-type': 'application/json', 'webhook-id': `ceiling_${i}_${posts}`, 'content-length': body.length } }, (res) => {
          res.resume()
          res.on('end', () => resolve())
        })
        req.on('error', () => resolve())
        req.end(body)
      })
      posts++
    }
    agent.destroy()
  }))
  const seconds = (performance.now() - t0) / 1000
  return { postsPerSecond: Math.round(posts / seconds), seconds: Number(seconds.toFixed(2)) }
}
