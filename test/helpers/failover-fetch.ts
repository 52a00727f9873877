/** One request the fetch sent: the process it reached and the resume point it carried. */
export interface Forwarded {
  readonly origin: string
  readonly lastEventId: string | null
}

/**
 * A fetch for an EventSource behind a load balancer over several processes: each request
 * goes to the first origin still taking connections, and a connection refused (the process
 * died) moves it to the next one for good, as a balancer's health check would. The client
 * keeps one URL and its own Last-Event-ID; only the origin changes. `token` goes in the
 * Authorization header; every request sent is added to `forwarded`.
 */
export function failoverFetch(origins: readonly string[], token: string, forwarded: Forwarded[]): typeof fetch {
  let current = 0
  return async (input, init) => {
    const headers = new Headers(init?.headers)
    headers.set('authorization', `Bearer ${token}`)
    for (;;) {
      const origin = origins[current]!
      const url = new URL(input instanceof Request ? input.url : String(input))
      const target = `${origin}${url.pathname}${url.search}`
      try {
        const res = await fetch(target, { ...init, headers })
        forwarded.push({ origin, lastEventId: headers.get('last-event-id') })
        return res
      } catch (err) {
        // A refused connection is a dead process; anything else (the client's abort) is the caller's.
        if ((err as { cause?: { code?: string } }).cause?.code !== 'ECONNREFUSED' || current === origins.length - 1) throw err
        current++
      }
    }
  }
}
