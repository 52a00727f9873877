import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { EventSource } from 'eventsource'
import pino from 'pino'
import t from 'tap'
import { route } from '../../gateway/http/route.js'
import { uws, type HttpResponse, type us_listen_socket } from '../../gateway/http/uws.js'
import { FlushScheduler } from '../../gateway/streams/sse-flush.js'
import { sseFrame } from '../../gateway/streams/sse-frame.js'
import { SseSink } from '../../gateway/streams/sse-sink.js'
import type { SignalAcceptedEvent } from '../../schemas/index.js'

/**
 * The SSE sink on a real uWS app in this process, read by a real WHATWG EventSource and
 * by a bare socket that stops reading: frames queued in one event-loop turn go out in
 * one cork (one send), complete, in order and split into the right events; a reader
 * that stops reading is cut off at the buffer limit, frames not yet flushed counted,
 * while another stream of the same process keeps receiving; one that takes nothing while
 * a write waits is cut off at the stall timeout; each cut is counted once, with its reason.
 */

const event = (seq: number): SignalAcceptedEvent => ({
  event: 'byo.signal.accepted',
  event_id: String(seq),
  rental_id: 'rnt_test',
  source_id: 'src_test',
  signal_id: `sig-${String(seq).padStart(8, '0')}`,
  token: 'So11111111111111111111111111111111111111112',
  severity: 'warning',
  emitted_at: '2026-11-24T10:00:00.000Z',
  received_at: '2026-11-24T10:00:00.001Z',
  receipt_id: 'rc_00000000000000000000000000000000',
  confidence: null,
  // A string last: the reads below count frames by their `"}` ending.
  note: 'n',
})

interface Stream {
  sink: SseSink
  /** res.cork calls after begin(): one per flush of the sink. */
  corks: number
  /** Why the server closed it, each time it was counted. */
  disconnects: string[]
  closed: number
}

/** A uWS app whose `/stream` route opens a sink with `limitBytes` and hands it to `opened`. */
async function app(t: { teardown(fn: () => unknown): void }, limitBytes: number, opened: (s: Stream) => void): Promise<{ port: number; url: string }> {
  const logger = pino({ level: 'silent' })
  const scheduler = new FlushScheduler((err) => {
    throw err
  })
  const server = uws.App()
  route(server, 'get', '/stream', logger, (reply, _req, res: HttpResponse) => {
    const stream: Stream = { sink: undefined as unknown as SseSink, corks: 0, disconnects: [], closed: 0 }
    const cork = res.cork.bind(res)
    let begun = false
    // A count around the real response's cork: each flush of the sink corks once.
    res.cork = (cb: () => void) => {
      if (begun) stream.corks++
      return cork(cb)
    }
    stream.sink = new SseSink(res, reply, limitBytes, scheduler, () => {}, (reason) => stream.disconnects.push(reason), () => stream.closed++)
    reply.onAbort = () => stream.sink.aborted()
    stream.sink.begin(1000)
    begun = true
    opened(stream)
  })
  const socket = await new Promise<us_listen_socket>((resolve, reject) => server.listen('127.0.0.1', 0, (s) => (s ? resolve(s) : reject(new Error('no listen')))))
  t.teardown(() => uws.us_listen_socket_close(socket))
  const port = uws.us_socket_local_port(socket)
  return { port, url: `http://127.0.0.1:${port}/stream` }
}

async function until(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!done() && Date.now() < deadline) await sleep(10)
  return done()
}

t.test('events sent in one turn go out in one flush and reach an EventSource complete, in order, with their ids', async (t) => {
  let stream: Stream | undefined
  const { url } = await app(t, 1024 * 1024, (s) => (stream = s))
  const es = new EventSource(url)
  t.teardown(() => es.close())
  const got: { id: string; data: SignalAcceptedEvent }[] = []
  es.addEventListener('byo.signal.accepted', (e) => got.push({ id: e.lastEventId, data: JSON.parse(e.data) }))
  t.ok(await until(() => stream !== undefined, 5000), 'the stream opened')
  const s = stream as Stream

  // A few events in one turn: below the immediate-write size, so exactly one flush.
  for (let seq = 1; seq <= 10; seq++) t.equal(s.sink.send(event(seq)), true)
  t.equal(s.corks, 0, 'nothing is written before the turn ends')
  t.ok(await until(() => got.length === 10, 5000), 'all 10 arrived')
  t.equal(s.corks, 1, 'ten events, one flush (one cork, one send)')

  // A burst far above the cork buffer: written in 16 KB slices as it is queued, the rest at the turn's end.
  const burst: SignalAcceptedEvent[] = []
  for (let seq = 11; seq <= 1010; seq++) burst.push(event(seq))
  const bytes = burst.reduce((n, e) => n + sseFrame(e).length, 0)
  const before = s.corks
  for (const e of burst) s.sink.send(e)
  t.ok(await until(() => got.length === 1010, 10_000), `all 1,010 arrived (${got.length})`)
  const flushes = s.corks - before
  // A cork holds 16 KB with each write's chunk header (12 bytes at most); a frame that does not fit starts the next.
  const corks = Math.ceil(((bytes + 12 * burst.length) * 1.05) / (16 * 1024))
  t.ok(flushes <= corks + 1, `1,000 events (${bytes} bytes) in ${flushes} corks (${corks} full ones hold them), not one each`)

  t.same(got.map((g) => g.id), Array.from({ length: 1010 }, (_, i) => String(i + 1)), 'every event once, in order, the SSE id its event_id')
  t.same(got.filter((g) => g.data.event_id !== g.id), [], 'each data line carries the event_id of its id: line')
  t.same(got[500]?.data, event(501), 'the data line is the whole event')
  es.close()
  t.ok(await until(() => s.closed === 1, 5000), 'the sink learned that the client left')
  t.equal(s.sink.send(event(2000)), false, 'nothing is sent to a response the client left')
})

t.test('one event object sent to many streams is serialised once: they share the frame', async (t) => {
  const e = event(7)
  const frame = sseFrame(e)
  t.equal(sseFrame(e), frame, 'the same buffer for the same event object')
  t.equal(frame.toString(), `id: 7\nevent: byo.signal.accepted\ndata: ${JSON.stringify(e)}\n\n`)
  t.not(sseFrame(event(7)), frame, 'another object is serialised on its own')
})

t.test('a reader that pauses below the limit gets everything once it reads again, in order', async (t) => {
  const streams: Stream[] = []
  const { port } = await app(t, 64 * 1024 * 1024, (s) => streams.push(s))
  const socket = connect({ host: '127.0.0.1', port })
  socket.on('error', () => {})
  t.teardown(() => socket.destroy())
  let text = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => (text += chunk))
  socket.write(`GET /stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
  t.ok(await until(() => streams.length === 1 && text.includes('retry: 1000'), 5000))
  socket.pause()
  const s = streams[0] as Stream

  // Until uWS reports the socket full: the sink then waits for onWritable with frames queued.
  let seq = 0
  let refused = 0
  let blocked = false
  while (!blocked && seq < 400_000) {
    for (let i = 0; i < 1000; i++) if (!s.sink.send(event(++seq))) refused++
    await sleep(1)
    blocked = await Promise.race([s.sink.writable().then(() => false), sleep(20).then(() => true)])
  }
  t.ok(blocked, `the socket pushed back after ${seq} events`)
  // More while blocked: these wait in the sink's queue, not in uWS.
  for (let i = 0; i < 500; i++) if (!s.sink.send(event(++seq))) refused++
  t.equal(refused, 0, 'every event was taken')
  const drained = s.sink.writable()
  socket.resume()
  t.ok(await until(() => text.split('"}\n\n').length - 1 === seq, 20_000), 'every event arrived, the last ones too')
  await drained
  const ids = [...text.matchAll(/\nid: (\d+)\n/g), ...text.matchAll(/^id: (\d+)\n/g)].map((m) => Number(m[1]))
  t.equal(ids.length, seq, `${seq} frames read`)
  t.same(ids.filter((id, i) => id !== i + 1), [], 'in order, none twice, none missing')
  t.same(s.disconnects, [], 'not counted as a disconnect')
  t.equal(s.sink.closed, false)
})

t.test('a reader that stops reading is disconnected at the buffer limit, and the others keep receiving', async (t) => {
  const limit = 64 * 1024
  const streams: Stream[] = []
  const { port, url } = await app(t, limit, (s) => streams.push(s))

  // The slow reader: a bare socket that sends its request and never reads.
  const slowSocket = connect({ host: '127.0.0.1', port })
  slowSocket.on('error', () => {})
  t.teardown(() => slowSocket.destroy())
  let slowClosed = false
  let slowText = ''
  slowSocket.setEncoding('latin1')
  slowSocket.on('data', (chunk: string) => (slowText += chunk))
  slowSocket.on('close', () => (slowClosed = true))
  slowSocket.write(`GET /stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
  slowSocket.pause()
  t.ok(await until(() => streams.length === 1, 5000))
  const slow = streams[0] as Stream

  const es = new EventSource(url)
  t.teardown(() => es.close())
  let healthy = 0
  es.addEventListener('byo.signal.accepted', () => healthy++)
  t.ok(await until(() => streams.length === 2, 5000))
  const fast = streams[1] as Stream

  // A thousand events a turn to both until the slow one is cut (the kernel's socket buffers take some megabytes first).
  let seq = 0
  let sentToFast = 0
  let takenBySlow = 0
  let refused = false
  while (!refused && seq < 400_000) {
    for (let i = 0; i < 1000; i++) {
      const e = event(++seq)
      if (!refused && slow.sink.send(e)) takenBySlow++
      else refused = true
      if (fast.sink.send(e)) sentToFast++
    }
    // Let the turn end and the healthy client read.
    await sleep(1)
    while (healthy < sentToFast - 20_000) await sleep(5)
  }
  t.equal(refused, true, `the slow stream refused further events (after ${seq})`)
  t.same(slow.disconnects, ['slow_reader'], 'counted as a slow-reader disconnect, once')
  t.equal(slow.closed, 1, 'the stream was closed once')
  t.equal(slow.sink.closed, true)
  t.equal(slow.sink.send(event(++seq)), false, 'and stays closed')

  slowSocket.resume()
  t.ok(await until(() => slowClosed, 5000), 'the slow reader sees its connection closed once it reads again')
  // What the sink took but the reader never got was dropped at the cut: the sink's queue
  // (at most the limit) and what uWS held of the one write it refused (one cork's worth).
  const read = slowText.split('"}\n\n').length - 1
  let dropped = 0
  for (let s = read + 1; s <= takenBySlow; s++) dropped += sseFrame(event(s)).length
  t.ok(read > 0 && read < takenBySlow, `the reader got the first ${read} of ${takenBySlow} events`)
  t.ok(dropped <= limit + 48 * 1024, `${dropped} bytes were held for the slow reader when it was cut, within the ${limit}-byte limit and one write`)
  t.equal(fast.sink.closed, false, 'the healthy stream is still open')
  t.ok(await until(() => healthy === sentToFast, 10_000), `the healthy reader got all ${sentToFast} events (${healthy})`)
})

/** A bare socket that asks for the stream; paused at once, it reads nothing until resumed. */
function bareReader(t: { teardown(fn: () => unknown): void }, port: number) {
  const socket = connect({ host: '127.0.0.1', port })
  socket.on('error', () => {})
  t.teardown(() => socket.destroy())
  const state = { text: '', closed: false }
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => (state.text += chunk))
  socket.on('close', () => (state.closed = true))
  socket.write(`GET /stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
  socket.pause()
  return { socket, state }
}

/** Sends events until uWS reports the socket full; resolves with how many were sent. */
async function untilBlocked(sink: SseSink): Promise<number> {
  let seq = 0
  for (;;) {
    for (let i = 0; i < 1000; i++) sink.send(event(++seq))
    await sleep(1)
    if (await Promise.race([sink.writable().then(() => false), sleep(20).then(() => true)])) return seq
    if (seq > 400_000) throw new Error('the socket never pushed back')
  }
}

t.test('a reader that takes nothing while a write waits is cut at the stall timeout, counted stalled_reader once; a shorter pause is not', async (t) => {
  const stallMs = 400
  const streams: Stream[] = []
  const { port } = await app(t, 256 * 1024 * 1024, (s) => streams.push(s))
  // The stall clock as the stream routes run it: ten checks per timeout.
  const clock = setInterval(() => {
    for (const s of streams) s.sink.checkStall(Date.now(), stallMs)
  }, stallMs / 10)
  t.teardown(() => clearInterval(clock))

  const paused = bareReader(t, port)
  t.ok(await until(() => streams.length === 1, 5000))
  const brief = streams[0] as Stream
  const sent = await untilBlocked(brief.sink)
  await sleep(stallMs / 2)
  paused.socket.resume()
  t.ok(await until(() => paused.state.text.split('"}\n\n').length - 1 === sent, 20_000), `a reader that paused for half the timeout gets all ${sent} events`)
  await sleep(stallMs * 2)
  t.same(brief.disconnects, [], 'and is not cut')
  t.equal(brief.sink.closed, false)

  const stalled = bareReader(t, port)
  t.ok(await until(() => streams.length === 2, 5000))
  const s = streams[1] as Stream
  // The write blocked somewhere between these two readings: the cut comes at least the
  // timeout after the first, and (on a loaded machine, loosely) soon after the second.
  const beforeBlock = Date.now()
  await untilBlocked(s.sink)
  const blockSeen = Date.now()
  t.ok(await until(() => s.sink.closed, 5000), 'the stalled stream is closed')
  const cutAt = Date.now()
  t.ok(cutAt - beforeBlock >= stallMs, `not before the ${stallMs} ms timeout: ${cutAt - beforeBlock} ms after the writes began`)
  t.ok(cutAt - blockSeen < stallMs * 8, `soon after it: ${cutAt - blockSeen} ms after the block was seen`)
  t.same(s.disconnects, ['stalled_reader'], 'counted once, as stalled_reader')
  s.sink.end('shutdown')
  s.sink.checkStall(Date.now() + 60_000, stallMs)
  t.same(s.disconnects, ['stalled_reader'], 'a closed stream is counted no more')
  stalled.socket.resume()
  t.ok(await until(() => stalled.state.closed, 5000), 'the reader sees its connection closed once it reads again')
})

t.test('a stream the server ends is counted once with the reason it gives; one the client leaves is not counted', async (t) => {
  const streams: Stream[] = []
  const { url } = await app(t, 1024 * 1024, (s) => streams.push(s))
  const ended = new EventSource(url)
  t.teardown(() => ended.close())
  t.ok(await until(() => streams.length === 1, 5000))
  const a = streams[0] as Stream
  a.sink.end('token_revoked')
  a.sink.end('shutdown')
  a.sink.drop('error')
  t.same(a.disconnects, ['token_revoked'], 'the first reason, once')
  ended.close()

  const left = new EventSource(url)
  t.ok(await until(() => streams.length === 2, 5000))
  const b = streams[1] as Stream
  left.close()
  t.ok(await until(() => b.closed === 1, 5000), 'the sink learned that the client left')
  b.sink.end('shutdown')
  t.same(b.disconnects, [], 'a client leaving is no server disconnect')
})
