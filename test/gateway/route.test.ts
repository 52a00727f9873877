import pino from 'pino'
import { Writable } from 'node:stream'
import t from 'tap'
import { route } from '../../gateway/http/route.js'
import { uws, type us_listen_socket } from '../../gateway/http/uws.js'

/** A real uWS app in this process, with one handler that throws and one that answers. */
async function app(t: { teardown(fn: () => unknown): void }) {
  const lines: Array<Record<string, unknown>> = []
  const sink = new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) })
  const logger = pino({ level: 'info' }, sink)
  const server = uws.App()
  route(server, 'get', '/throws', logger, (reply) => {
    void reply
    throw new Error('a bug in a handler')
  })
  route(server, 'post', '/throws-after-answer', logger, (reply) => {
    reply.send(200, { ok: true, data: 'answered' })
    throw new Error('a bug after the answer')
  })
  route(server, 'any', '/fine', logger, (reply) => reply.send(200, { ok: true, data: 'fine' }))
  const socket = await new Promise<us_listen_socket>((resolve, reject) => server.listen('127.0.0.1', 0, (s) => (s ? resolve(s) : reject(new Error('no listen')))))
  t.teardown(() => uws.us_listen_socket_close(socket))
  return { url: `http://127.0.0.1:${uws.us_socket_local_port(socket)}`, lines }
}

t.test('a handler that throws costs its own request a 500 and a log line, and the process keeps serving', async (t) => {
  const { url, lines } = await app(t)
  const res = await fetch(`${url}/throws`)
  t.equal(res.status, 500)
  const body = (await res.json()) as { ok: boolean; error: { code: string; request_id: string } }
  t.equal(body.error.code, 'internal_error')
  t.equal(res.headers.get('connection'), 'close', 'the connection is closed: the handler may have left a body unread')
  t.match(lines, [{ msg: 'request handler failed', request_id: body.error.request_id, err: { message: 'a bug in a handler' } }])

  const after = await fetch(`${url}/throws-after-answer`, { method: 'POST' })
  t.equal(after.status, 200, 'a throw after the answer leaves the answer as it was')
  t.same(await after.json(), { ok: true, data: 'answered' })

  const fine = await fetch(`${url}/fine`)
  t.equal(fine.status, 200, 'still serving')
  const head = await fetch(`${url}/fine`, { method: 'HEAD' })
  t.equal(head.status, 200)
  t.equal(await head.text(), '', 'an any route answers HEAD without a body')
})
