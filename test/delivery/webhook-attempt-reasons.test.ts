import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import { createServer as createTcpServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { Agent } from 'undici'
import { DeliveryKeys } from '../../delivery/webhooks/delivery-keys.js'
import { guardedConnector } from '../../delivery/webhooks/guarded-connector.js'
import { systemLookup } from '../../delivery/webhooks/webhook-url.js'
import { sendWebhook, type AttemptOutcome } from '../../delivery/webhooks/webhook-worker.js'
import { fileKvBuckets } from '../../storage/index.js'

/**
 * A failed attempt tells the renter a coarse reason, never the socket error: its text
 * names the address and port tried and how the far side behaved, which would let a
 * renter map the hosts and ports reachable from the operator's network. Real local
 * receivers, each failing one way; private addresses allowed only where the case needs
 * the connection to be made.
 */

const TIMEOUT_MS = 300

async function sender(t: Test, allowPrivate: boolean) {
  const dir = await mkdtemp(join(tmpdir(), 'webhook-reasons-'))
  const keysBucket = await fileKvBuckets({ dir: join(dir, 'kv') })('delivery-keys', DeliveryKeys.bucketLimits)
  const keys = await DeliveryKeys.open({ bucket: keysBucket })
  const dispatcher = new Agent({ connect: guardedConnector({ allowPrivate, lookup: systemLookup, timeoutMs: TIMEOUT_MS }) })
  t.teardown(async () => {
    await dispatcher.close()
    await keys.close()
    await keysBucket.close()
    await rm(dir, { recursive: true, force: true })
  })
  return (url: string) => sendWebhook({ dispatcher, timeoutMs: TIMEOUT_MS }, url, 'msg_test_reasons', '{"event":"byo.webhook.test"}', Date.now(), (id, ts, body) => keys.signature(id, ts, body))
}

async function listening<S extends Server | ReturnType<typeof createTcpServer>>(t: Test, server: S): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { if ('closeAllConnections' in server) server.closeAllConnections(); server.close(() => resolve()) }))
  return (server.address() as AddressInfo).port
}

/** The outcome carries no trace of the socket error: no port, no address, no error code or text. */
function coarse(t: Test, outcome: AttemptOutcome, port: number): void {
  const shown = JSON.stringify({ result: outcome.result, status: outcome.status, error: outcome.error })
  t.notMatch(shown, String(port), 'the port is not named')
  t.notMatch(shown, /127\.0\.0\.1|::1|localhost/, 'the address is not named')
  t.notMatch(shown, /\bE[A-Z]{4,}\b|ERR_|[Ss]ocket|connect |refused,/, 'no socket error code or text')
}

t.test('a closed port is reported as unreachable, without the address, port or socket error', async (t) => {
  const send = await sender(t, true)
  const probe = createTcpServer()
  const port = await new Promise<number>((resolve) => probe.listen(0, '127.0.0.1', () => resolve((probe.address() as AddressInfo).port)))
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  const outcome = await send(`http://127.0.0.1:${port}/hook`)
  t.match(outcome, { result: 'connection', status: null, error: 'unreachable' })
  coarse(t, outcome, port)
})

t.test('a connection reset before an answer is reported as unreachable', async (t) => {
  const send = await sender(t, true)
  const port = await listening(t, createTcpServer((socket) => socket.resetAndDestroy()))
  const outcome = await send(`http://127.0.0.1:${port}/hook`)
  t.match(outcome, { result: 'connection', status: null, error: 'unreachable' })
  coarse(t, outcome, port)
})

t.test('https to a receiver that does not speak TLS is reported as tls_error', async (t) => {
  const send = await sender(t, true)
  const port = await listening(t, createServer((_req, res) => res.writeHead(200).end()))
  const outcome = await send(`https://127.0.0.1:${port}/hook`)
  t.match(outcome, { result: 'connection', status: null, error: 'tls_error' })
  coarse(t, outcome, port)
})

t.test('a receiver that never answers is reported as timeout', async (t) => {
  const send = await sender(t, true)
  const port = await listening(t, createServer(() => undefined))
  const outcome = await send(`http://127.0.0.1:${port}/hook`)
  t.match(outcome, { result: 'timeout', status: null, error: 'timeout' })
  coarse(t, outcome, port)
})

t.test('an address the guard refuses at connect time is reported as refused_address, without the address', async (t) => {
  const send = await sender(t, false)
  const port = await listening(t, createServer((_req, res) => res.writeHead(200).end()))
  const outcome = await send(`http://127.0.0.1:${port}/hook`)
  t.match(outcome, { result: 'refused_address', status: null, error: 'refused_address' })
  coarse(t, outcome, port)
})

t.test('a receiver that answers is reported by its HTTP status', async (t) => {
  const send = await sender(t, true)
  const port = await listening(t, createServer((_req, res) => res.writeHead(503).end()))
  const outcome = await send(`http://127.0.0.1:${port}/hook`)
  t.match(outcome, { result: 'http_status', status: 503, error: 'the receiver answered 503' })
  coarse(t, outcome, port)
})
