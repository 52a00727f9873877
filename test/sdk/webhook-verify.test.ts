import { generateKeyPairSync, sign } from 'node:crypto'
import t from 'tap'
import { Webhook } from 'standardwebhooks'
import { newWebhookSecret, signWebhookV1, SseParser, verifyWebhook, WebhookVerificationError } from '@signal-ingest-gateway/sdk'

/** Webhook verification (both schemes, against independent signers) and the event-stream parser, in process. */

const body = '{"event":"byo.signal.accepted","event_id":"42"}'
const id = 'msg_rnt_AAAAAAAAAAAAAAAA_42'
const now = 1_900_000_000
const headers = (signature: string, ts = now) => ({ 'Webhook-Id': id, 'webhook-timestamp': String(ts), 'webhook-signature': signature })

/** As the gateway signs a delivery today: Ed25519 over `<id>.<ts>.<body>`, `v1a,` and base64, the key published as `whpk_` + base64. */
function ed25519Sender() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const whpk = `whpk_${Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url').toString('base64')}`
  return { whpk, sign: (ts = now, b = body) => `v1a,${sign(null, Buffer.from(`${id}.${ts}.${b}`), privateKey).toString('base64')}` }
}

const reason = (fn: () => unknown) => {
  try {
    fn()
    return 'valid'
  } catch (err) {
    return err instanceof WebhookVerificationError ? err.code : `unexpected: ${String(err)}`
  }
}

t.test('v1a: a delivery signed as the gateway signs verifies with its published key; during a rotation any one of two values does', async (t) => {
  const current = ed25519Sender()
  const retiring = ed25519Sender()
  t.match(verifyWebhook(headers(current.sign()), body, { publicKeys: [current.whpk], now: now * 1000 }), { id, timestamp: now, scheme: 'v1a' })
  t.equal(reason(() => verifyWebhook(headers(`${retiring.sign()} ${current.sign()}`), new TextEncoder().encode(body), { publicKeys: [current.whpk], now: now * 1000 })), 'valid', 'bytes, and the second value')
  t.equal(reason(() => verifyWebhook(headers(retiring.sign()), body, { publicKeys: [current.whpk], now: now * 1000 })), 'invalid_signature', 'a key not held')
  t.equal(reason(() => verifyWebhook(headers(current.sign()), body.replace('42', '43'), { publicKeys: [current.whpk], now: now * 1000 })), 'invalid_signature', 'a changed body')
})

t.test('v1: HMAC-SHA256 with a whsec_ secret, both ways with the official standardwebhooks library', async (t) => {
  const secret = newWebhookSecret()
  t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
  const theirs = new Webhook(secret).sign(id, new Date(now * 1000), body)
  t.equal(signWebhookV1(secret, id, now, body), theirs, 'the same value the library computes')
  t.match(verifyWebhook(headers(theirs), body, { secret, now: now * 1000 }), { scheme: 'v1' })
  const fresh = Math.floor(Date.now() / 1000)
  t.same(new Webhook(secret).verify(body, headers(signWebhookV1(secret, id, fresh, body), fresh)), JSON.parse(body), 'the library verifies ours')
  t.equal(reason(() => verifyWebhook(headers(theirs), body, { secret: newWebhookSecret(), now: now * 1000 })), 'invalid_signature', 'another secret')
})

t.test('each refusal has its code: missing header, bad or stale timestamp, no value of a usable scheme, no key', async (t) => {
  const sender = ed25519Sender()
  const keys = { publicKeys: [sender.whpk], now: now * 1000 }
  t.equal(reason(() => verifyWebhook({ 'webhook-id': id, 'webhook-timestamp': String(now) }, body, keys)), 'missing_header')
  t.equal(reason(() => verifyWebhook(headers(sender.sign(), 'soon' as unknown as number), body, keys)), 'invalid_timestamp')
  t.equal(reason(() => verifyWebhook(headers(sender.sign(now - 301), now - 301), body, keys)), 'stale_timestamp', 'older than 300 s')
  t.equal(reason(() => verifyWebhook(headers(sender.sign(now - 301), now - 301), body, { ...keys, toleranceSeconds: 400 })), 'valid', 'within a wider tolerance')
  t.equal(reason(() => verifyWebhook(headers(sender.sign()), body, { secret: newWebhookSecret(), now: now * 1000 })), 'no_usable_signature', 'a v1a value and only a secret')
  t.equal(reason(() => verifyWebhook(headers(sender.sign()), body, { now: now * 1000 })), 'invalid_key')
  t.equal(reason(() => verifyWebhook(headers(sender.sign()), body, { publicKeys: ['whpk_short'], now: now * 1000 })), 'invalid_key')
})

t.test('the event-stream parser: events split anywhere, CRLF, CR and LF line ends, several data lines, comments, retry, ids carried over', async (t) => {
  const text = 'retry: 2500\r\n: ping\r\n\r\nid: 7\nevent: byo.signal.accepted\ndata: {"a":1}\n\ndata: one\rdata: two\r\rid: 9\r\nevent: x\r\ndata: {}\r\n\r\n'
  for (const size of [1, 2, 5, text.length]) {
    const parser = new SseParser('3')
    const out = []
    for (let i = 0; i < text.length; i += size) out.push(...parser.push(text.slice(i, i + size)))
    t.same(out, [
      { event: 'byo.signal.accepted', data: '{"a":1}', id: '7' },
      { event: 'message', data: 'one\ntwo', id: '7' },
      { event: 'x', data: '{}', id: '9' },
    ], `pieces of ${size}`)
    t.equal(parser.retryMs, 2500)
  }
})
