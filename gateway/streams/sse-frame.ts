import type { DeliveryEvent } from '../../schemas/index.js'

/**
 * An event's SSE frame (`id:`, `event:`, `data:` and the blank line) as bytes, made once
 * per event object. The streams of one rental are handed the same event object for a
 * log record (delivery's live fan-out shares it), so they share one serialisation and
 * one buffer, which uWS writes without converting a string per stream.
 */
const frames = new WeakMap<DeliveryEvent, Buffer>()

export function sseFrame(event: DeliveryEvent): Buffer {
  let frame = frames.get(event)
  if (frame === undefined) {
    frame = Buffer.from(`id: ${event.event_id}\nevent: ${event.event}\ndata: ${JSON.stringify(event)}\n\n`)
    frames.set(event, frame)
  }
  return frame
}

/** A notice's frame: `event:` and `data:` without `id:`, so the reader's resume point does not move. */
export function noticeFrame(notice: { readonly event: string }): Buffer {
  return Buffer.from(`event: ${notice.event}\ndata: ${JSON.stringify(notice)}\n\n`)
}

/** A comment line: keeps proxies and the client from taking a quiet stream for a dead one. */
export const PING_FRAME: Buffer = Buffer.from(': ping\n\n')
