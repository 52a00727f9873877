import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A real HTTP server (node:http on 127.0.0.1) that answers each request with the next
 * scripted action, for the SDK's retry tests: the gateway cannot be made to answer 500, a
 * dropped connection or a hang on cue, and a 503's Retry-After only under real overload.
 * It records every request as received, so a test can check what the client sent.
 */

export type ScriptedAction =
  | { readonly status: number; readonly headers?: Record<string, string>; readonly body?: unknown }
  /** The connection is destroyed after the request is read: a network error for the client. */
  | 'reset'
  /** No answer (until the server closes). */
  | 'hang'

export interface ReceivedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
  readonly at: number
}

export interface ScriptedServer {
  readonly url: string
  readonly received: ReceivedRequest[]
  close(): Promise<void>
}

/** Answers request n with `script[n]`, and with the last action once the script runs out. */
export async function startScriptedServer(script: readonly ScriptedAction[]): Promise<ScriptedServer> {
  const received: ReceivedRequest[] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      received.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks), at: Date.now() })
      const action = script[Math.min(received.length, script.length) - 1] as ScriptedAction
      if (action === 'reset') return void req.socket.destroy()
      if (action === 'hang') return
      const text = action.body === undefined ? '' : typeof action.body === 'string' ? action.body : JSON.stringify(action.body)
      res.writeHead(action.status, { 'content-type': 'application/json', ...action.headers })
      res.end(text)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** A 202 body as the gateway writes it. */
export const acceptedBody = (signalId: string, sourceId: string, extra: Record<string, unknown> = {}) => ({
  ok: true,
  signal_id: signalId,
  source_id: sourceId,
  status: 'accepted',
  received_at: new Date().toISOString(),
  ...extra,
})

/** An error body as the gateway writes it. */
export const errorBody = (code: string, message = code) => ({ ok: false, error: { code, message, request_id: `req_${code}` } })
