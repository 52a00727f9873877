import { EventSource } from 'eventsource'

/**
 * An EventSource whose connections end at random moments, as a dropped connection would
 * (the client closes its socket, and the stream it reads just ends); it reconnects by itself.
 */
export function flakyEventSource(url: string, token: string, cuts: { count: number }): EventSource {
  return new EventSource(url, {
    fetch: async (input, init) => {
      const res = await fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` } })
      if (res.body === null || res.status !== 200) return res
      const reader = res.body.getReader()
      let cut = false
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          const timer = setTimeout(() => {
            cut = true
            cuts.count++
            void reader.cancel().catch(() => {})
            try {
              controller.close()
            } catch {
              // The server ended the stream first.
            }
          }, 100 + Math.random() * 400)
          void (async () => {
            try {
              for (;;) {
                const chunk = await reader.read()
                if (chunk.done || cut) break
                controller.enqueue(chunk.value)
              }
              if (!cut) {
                clearTimeout(timer)
                controller.close()
              }
            } catch (err) {
              if (!cut) controller.error(err)
            }
          })()
        },
      })
      return new Response(body, { status: res.status, headers: res.headers })
    },
  })
}
