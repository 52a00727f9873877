import { createServer, type Server } from 'node:http'

/**
 * Local webhook receivers, one node:http server per rental. A failing receiver answers
 * 500 to everything; a healthy one 204. Deliveries are counted once per webhook-id (a
 * retry repeats it), with the time of the last new one.
 */
export class Receiver {
  readonly #server: Server
  failing = false
  delivered = 0
  failed = 0
  lastAt = 0
  firstAt = 0
  readonly #seen = new Set<string>()

  constructor() {
    this.#server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
      req.resume()
      req.on('end', () => {
        if (this.failing) {
          this.failed++
          res.writeHead(500).end()
          return
        }
        const id = String(req.headers['webhook-id'])
        if (!this.#seen.has(id)) {
          this.#seen.add(id)
          this.delivered++
          const now = performance.now()
          if (this.firstAt === 0) this.firstAt = now
          this.lastAt = now
        }
        res.writeHead(204).end()
      })
    })
  }

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r))
    const a = this.#server.address()
    if (a === null || typeof a === 'string') throw new Error('receiver has no port')
    return `http://127.0.0.1:${a.port}/hook`
  }

  close(): Promise<void> {
    this.#server.closeAllConnections()
    return new Promise((r) => this.#server.close(() => r()))
  }
}

/**
 * One node:http server answering 204 for many endpoints (`/hook/<n>`): 10,000 webhooks
 * spread over a hundred of these. Each server is one origin, and the gateway holds one
 * connection per origin, so the endpoints of one server share a connection as endpoints
 * of one receiving host would. Counts new webhook-ids, overall and per endpoint.
 */
export class SharedReceiver {
  readonly #server: Server
  readonly #seen = new Set<string>()
  readonly perPath = new Map<string, number>()
  delivered = 0
  lastAt = 0

  constructor() {
    this.#server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
      req.resume()
      req.on('end', () => {
        const id = String(req.headers['webhook-id'])
        if (!this.#seen.has(id)) {
          this.#seen.add(id)
          this.delivered++
          this.perPath.set(req.url ?? '', (this.perPath.get(req.url ?? '') ?? 0) + 1)
          this.lastAt = performance.now()
        }
        res.writeHead(204).end()
      })
    })
  }

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r))
    const a = this.#server.address()
    if (a === null || typeof a === 'string') throw new Error('receiver has no port')
    return `http://127.0.0.1:${a.port}`
  }

  close(): Promise<void> {
    this.#server.closeAllConnections()
    return new Promise((r) => this.#server.close(() => r()))
  }
}
