import { setTimeout as sleep } from 'node:timers/promises'
import { call } from './api.js'

/** A gateway the admin can call: its address and the admin token. */
type AdminGateway = { readonly url: string; readonly adminToken: string }

let counter = 0

/** A renter token issued by the admin, for a subject of its own. */
export async function renterToken(gw: AdminGateway): Promise<{ token: string; subject: string; tokenId: string }> {
  const subject = `renter:r${++counter}_${Date.now().toString(36)}`
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject } })
  if (res.status !== 201) throw new Error(`renter token: ${res.status}`)
  return { token: res.body.data.token, subject, tokenId: res.body.data.token_id }
}

/** A rental made by the admin; its id. */
export async function rent(gw: AdminGateway, body: Record<string, unknown>): Promise<string> {
  const res = await call(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, body })
  if (res.status !== 201) throw new Error(`rental: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data.rental_id
}

/** A stream ticket of the rental, asked with the renter's token. */
export async function ticketOf(gw: { readonly url: string }, token: string, rentalId: string): Promise<string> {
  const res = await call(gw.url, 'POST', `/v1/rentals/${rentalId}/stream-tickets`, { token })
  if (res.status !== 201) throw new Error(`ticket: ${res.status}`)
  return res.body.data.ticket
}

/**
 * Reads an SSE body as text as it comes. `state.endedAt` is when the body ended (the
 * server closed the stream, or the connection was cut).
 */
export function streamReader(res: Response) {
  const reader = res.body!.getReader()
  const state = { text: '', ended: false, endedAt: 0 }
  const pump = (async () => {
    try {
      for (;;) {
        const chunk = await reader.read()
        if (chunk.done) break
        state.text += Buffer.from(chunk.value).toString()
      }
    } catch {
      // Cut: counted as ended.
    }
    state.endedAt = Date.now()
    state.ended = true
  })()
  return {
    state,
    /** Waits until `done` holds, the stream ends, or `ms` pass. */
    async until(done: () => boolean, ms = 5000) {
      const deadline = Date.now() + ms
      while (!done() && !state.ended && Date.now() < deadline) await sleep(20)
    },
    async cancel() {
      await reader.cancel().catch(() => {})
      await pump
    },
  }
}

/** The events of an SSE body, in order: each frame's `data` parsed (comments and the retry hint left out). */
export function sseEvents(text: string): any[] {
  return text
    .split('\n\n')
    .map((frame) => frame.split('\n').find((line) => line.startsWith('data: ')))
    .filter((line): line is string => line !== undefined)
    .map((line) => JSON.parse(line.slice('data: '.length)))
}
