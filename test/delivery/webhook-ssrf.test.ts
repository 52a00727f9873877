import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import fc from 'fast-check'
import t from 'tap'
import { Agent, request } from 'undici'
import { addressRefusal } from '../../delivery/webhooks/address-policy.js'
import { guardedConnector } from '../../delivery/webhooks/guarded-connector.js'
import { checkWebhookUrl, type HostLookup, WebhookUrlError } from '../../delivery/webhooks/webhook-url.js'

const publicDns: HostLookup = async () => [{ address: '93.184.215.14', family: 4 }]
const strict = { allowPrivate: false, lookup: publicDns }

t.test('refused addresses: IPv4, IPv6, and IPv6 forms carrying a refused IPv4 address', async (t) => {
  const refused: Record<string, RegExp> = {
    '127.0.0.1': /loopback/,
    '127.255.0.9': /loopback/,
    '0.0.0.0': /this network/,
    '10.1.2.3': /private/,
    '172.16.0.1': /private/,
    '172.31.255.255': /private/,
    '192.168.1.1': /private/,
    '100.64.0.1': /shared/,
    '169.254.169.254': /metadata/,
    '169.254.1.1': /link-local/,
    '192.0.0.8': /IETF/,
    '192.0.2.1': /documentation/,
    '198.18.0.1': /benchmarking/,
    '198.51.100.7': /documentation/,
    '203.0.113.9': /documentation/,
    '224.0.0.1': /multicast/,
    '239.255.255.250': /multicast/,
    '240.0.0.1': /reserved/,
    '255.255.255.255': /broadcast/,
    '::': /unspecified/,
    '::1': /loopback/,
    'fc00::1': /unique local/,
    'fd12:3456::1': /unique local/,
    'fe80::1': /link-local/,
    'fe80::1%eth0': /link-local/,
    'ff02::1': /multicast/,
    'fd00:ec2::254': /metadata/,
    '2001:db8::1': /documentation/,
    '2001:0:4136:e378:8000:63bf:3fff:fdd2': /Teredo/,
    '::ffff:127.0.0.1': /IPv4-mapped form of a loopback/,
    '::ffff:7f00:1': /IPv4-mapped form of a loopback/,
    '::ffff:169.254.169.254': /IPv4-mapped form of the cloud metadata/,
    '::ffff:10.0.0.1': /IPv4-mapped form of a private/,
    '64:ff9b::a9fe:a9fe': /NAT64 form of the cloud metadata/,
    '64:ff9b::127.0.0.1': /NAT64 form of a loopback/,
    '2002:7f00:1::': /6to4 form of a loopback/,
    '2002:c0a8:101::1': /6to4 form of a private/,
    '::127.0.0.1': /IPv4-compatible/,
    '64:ff9b:1::1': /local NAT64/,
    '100::1': /discard/,
    'fec0::1': /site-local/,
    '4000::1': /reserved/,
    'localhost': /not an IP address/,
  }
  for (const [address, reason] of Object.entries(refused)) t.match(addressRefusal(address), reason, address)
})

t.test('public addresses pass, including public IPv4 inside mapped, NAT64 and 6to4 forms', async (t) => {
  for (const address of ['93.184.215.14', '8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1']) {
    t.equal(addressRefusal(address), undefined, address)
  }
})

t.test('URL hosts in decimal, octal, hex and short forms are judged as the address they are', async (t) => {
  const forms = ['https://2130706433/', 'https://0x7f000001/', 'https://017700000001/', 'https://0x7f.0.0.1/', 'https://0177.0.0.01/', 'https://127.1/', 'https://[::ffff:127.0.0.1]/', 'https://[::1]:8443/', 'https://169.254.169.254/latest/meta-data/', 'https://[0:0:0:0:0:ffff:a9fe:a9fe]/']
  for (const url of forms) await t.rejects(checkWebhookUrl(url, strict), { code: 'invalid_webhook_url' }, url)
  t.equal(new URL('https://2130706433/').hostname, '127.0.0.1', 'WHATWG URL normalises the decimal form')
  await t.rejects(checkWebhookUrl('https://0x7f000001/', strict), { message: /127\.0\.0\.1 is a loopback address/ })
})

t.test('a name resolving to a private address is refused, as is one with a private among public answers', async (t) => {
  await t.rejects(checkWebhookUrl('https://hooks.example.com/x', { allowPrivate: false, lookup: async () => [{ address: '10.0.0.5', family: 4 }] }), {
    message: /^the host hooks\.example\.com resolves to a private address/,
  })
  const mixed: HostLookup = async () => [{ address: '93.184.215.14', family: 4 }, { address: '::1', family: 6 }]
  await t.rejects(checkWebhookUrl('https://hooks.example.com/x', { allowPrivate: false, lookup: mixed }), { message: /^the host hooks\.example\.com resolves to a loopback address/ })
  const refused = await checkWebhookUrl('https://hooks.example.com/x', { allowPrivate: false, lookup: async () => [{ address: '10.0.0.5', family: 4 }] }).catch((e: Error) => e.message)
  t.notMatch(refused, /10\.0\.0\.5/, 'the address the name resolved to is not told to the renter')
  await t.rejects(checkWebhookUrl('https://nx.example/x', { allowPrivate: false, lookup: async () => Promise.reject(Object.assign(new Error('nx'), { code: 'ENOTFOUND' })) }), { message: /does not resolve \(ENOTFOUND\)/ })
})

t.test('only https unless private networks are allowed; credentials and fragments are refused', async (t) => {
  await t.rejects(checkWebhookUrl('http://hooks.example.com/', strict), { message: /must use https/ })
  await t.rejects(checkWebhookUrl('ftp://hooks.example.com/', strict), WebhookUrlError)
  await t.rejects(checkWebhookUrl('https://u:p@hooks.example.com/', strict), { message: /user name or password/ })
  await t.rejects(checkWebhookUrl('https://hooks.example.com/#x', strict), { message: /fragment/ })
  await t.rejects(checkWebhookUrl('not a url', strict), { message: /absolute URL/ })
  await t.rejects(checkWebhookUrl(`https://hooks.example.com/${'a'.repeat(2100)}`, strict), { message: /2048/ })
  t.equal(await checkWebhookUrl('https://hooks.example.com/in', strict), 'https://hooks.example.com/in')
  t.equal(await checkWebhookUrl('http://127.0.0.1:9/in', { allowPrivate: true, lookup: publicDns }), 'http://127.0.0.1:9/in')
})

t.test('a port outside 1 to 65535 is refused, the message naming it; ports in range and default ports pass', async (t) => {
  for (const [url, port] of [
    ['https://hooks.example.com:0/in', '0'],
    ['https://hooks.example.com:000/in', '0'],
    ['https://93.184.215.14:0/', '0'],
    ['https://[2606:4700::1111]:0/', '0'],
    ['https://hooks.example.com:65536/in', '65536'],
    ['https://hooks.example.com:99999999999', '99999999999'],
    ['https://[2606:4700::1111]:70000/', '70000'],
  ] as const) {
    await t.rejects(checkWebhookUrl(url, strict), { code: 'invalid_webhook_url', message: new RegExp(`the port ${port} is not a TCP port from 1 to 65535`) }, url)
  }
  t.equal(await checkWebhookUrl('https://hooks.example.com:1/in', strict), 'https://hooks.example.com:1/in')
  t.equal(await checkWebhookUrl('https://hooks.example.com:65535/in', strict), 'https://hooks.example.com:65535/in')
  t.equal(await checkWebhookUrl('https://hooks.example.com:443/in', strict), 'https://hooks.example.com/in', 'the default port is dropped, not refused')
  await t.rejects(checkWebhookUrl('https://hooks.example.com:x/in', strict), { message: /not an absolute URL/ }, 'a port that is no number is no URL')
})

t.test('property: any port from 1 to 65535 passes, any other written port is refused naming it', async (t) => {
  const https = (port: number) => `https://hooks.example.com:${port}/in`
  const inRange = fc.asyncProperty(fc.integer({ min: 1, max: 65_535 }), async (port) => {
    const href = await checkWebhookUrl(https(port), strict)
    return href === (port === 443 ? 'https://hooks.example.com/in' : https(port))
  })
  const outside = fc.asyncProperty(fc.oneof(fc.constant(0), fc.integer({ min: 65_536, max: Number.MAX_SAFE_INTEGER })), async (port) => {
    const refusal = await checkWebhookUrl(https(port), strict).then(() => undefined, (err: unknown) => err)
    return refusal instanceof WebhookUrlError && refusal.message.includes(`the port ${port} is not a TCP port`)
  })
  await t.resolves(fc.assert(inRange), 'every port in range passes')
  await t.resolves(fc.assert(outside), 'every port outside is refused by name')
})

t.test('at connect time: a name that changes its answer between check and connect is refused, and the checked address is the one connected to', async (t) => {
  const server = createServer((_req, res) => res.end('ok'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const port = (server.address() as AddressInfo).port

  // Injected DNS (there is no resolver here to rebind): public at registration, loopback on the next lookup.
  let lookups = 0
  const rebinding: HostLookup = async () => (++lookups === 1 ? [{ address: '93.184.215.14', family: 4 }] : [{ address: '127.0.0.1', family: 4 }])
  const url = `http://rebind.example:${port}/`
  t.equal(await checkWebhookUrl(url.replace('http:', 'https:'), { allowPrivate: false, lookup: rebinding }), `https://rebind.example:${port}/`)
  const strictAgent = new Agent({ connect: guardedConnector({ allowPrivate: false, lookup: rebinding, timeoutMs: 2000 }) })
  t.teardown(() => strictAgent.close())
  await t.rejects(request(url, { dispatcher: strictAgent }), { message: /rebind\.example resolves to a loopback address/ })

  // With private networks allowed, the connection goes to the address the guard resolved, with no second lookup.
  let calls = 0
  const counting: HostLookup = async () => {
    calls++
    return [{ address: '127.0.0.1', family: 4 }]
  }
  const open = new Agent({ connect: guardedConnector({ allowPrivate: true, lookup: counting, timeoutMs: 2000 }) })
  t.teardown(() => open.close())
  const res = await request(`http://pinned.example:${port}/`, { dispatcher: open })
  t.equal(res.statusCode, 200)
  t.equal(await res.body.text(), 'ok')
  t.equal(calls, 1, 'resolved once, by the guard')
})
