import { connect } from 'node:net'
import type { SseStream } from './sse-client.js'

/**
 * A stream that is read and thrown away on a bare TCP socket: no HTTP parsing, no strings,
 * just the byte count. The latency phase's subscribers that are not sampled and the idle
 * phase's 10,000 streams use it, so the client process spends its CPU on the sampled
 * streams and the pusher rather than on parsing every copy of every event (on a 2-core
 * machine the client's own backlog would otherwise be most of the measured latency).
 */
export function openDrainStream(url: string, rentalId: string, token: string, lastEventId?: string): SseStream & { bytes: number } {
  const u = new URL(url)
  let resolveOpened!: (status: number) => void
  const socket = connect({ host: u.hostname, port: Number(u.port) })
  const stream = {
    opened: new Promise<number>((r) => (resolveOpened = r)),
    events: 0,
    bytes: 0,
    closedByServer: false,
    close: () => socket.destroy(),
  }
  let head = `GET /v1/rentals/${rentalId}/events HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n`
  if (lastEventId !== undefined) head += `Last-Event-ID: ${lastEventId}\r\n`
  socket.write(`${head}\r\n`)
  socket.on('data', (chunk: Buffer) => {
    if (stream.bytes === 0) resolveOpened(Number(chunk.toString('latin1', 9, 12)) || 0) // "HTTP/1.1 200"
    stream.bytes += chunk.length
  })
  socket.on('close', () => {
    stream.closedByServer = true
    resolveOpened(0)
  })
  socket.on('error', () => {})
  return stream
}
