import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'

export interface Delivery {
  readonly path: string
  readonly id: string
  readonly body: string
}

/** A receiver for every endpoint (`/hook/<rental_id>`); `answer` decides each reply (default 204). */
export async function sharedReceiver(t: Test, answer?: (req: IncomingMessage, res: ServerResponse, d: Delivery) => void) {
  const got: Delivery[] = []
  const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      const d = { path: req.url ?? '', id: String(req.headers['webhook-id']), body }
      got.push(d)
      if (answer === undefined) res.writeHead(204).end()
      else answer(req, res, d)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, got }
}
