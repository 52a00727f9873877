import t from 'tap'
import { ConfigError, loadConfig } from '../../config/index.js'

t.test('PUBLIC_BASE_URL is kept as the origin it names: scheme and host lower-cased, a default port and a trailing slash dropped', async (t) => {
  for (const [given, origin] of <Array<[string, string]>>[
    ['https://ingest.example.com', 'https://ingest.example.com'],
    ['https://ingest.example.com/', 'https://ingest.example.com'],
    ['HTTPS://Ingest.Example.COM:443/', 'https://ingest.example.com'],
    ['http://127.0.0.1:8080', 'http://127.0.0.1:8080'],
    ['http://[::1]:9000/', 'http://[::1]:9000'],
  ]) {
    t.equal(loadConfig({ PUBLIC_BASE_URL: given }).PUBLIC_BASE_URL, origin, given)
  }
  t.equal(loadConfig({}).PUBLIC_BASE_URL, '', 'unset: the bound port decides later')
})

t.test('a PUBLIC_BASE_URL that is not an http(s) origin is refused, naming the variable', async (t) => {
  for (const bad of ['ingest.example.com', 'https://', 'http://host:99999', 'http://:80', 'http://[::1', 'http://a:b:c', 'http://%zz', 'https://x.com/p', 'https://x.com?', 'https://x.com#', 'https://u:p@x.com', 'https://x .com', 'ws://x.com']) {
    t.throws(() => loadConfig({ PUBLIC_BASE_URL: bad }), { constructor: ConfigError, message: /^PUBLIC_BASE_URL=/ }, bad)
  }
})

t.test('TRUSTED_PROXIES that is not a list of addresses or CIDR prefixes is refused, naming the variable and the entry', async (t) => {
  t.throws(() => loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8,proxy.internal' }), { constructor: ConfigError, message: /^TRUSTED_PROXIES is not valid: "proxy\.internal"/ })
  t.throws(() => loadConfig({ TRUSTED_PROXY: '10.0.0.1' }), { constructor: ConfigError, message: /^unknown variable TRUSTED_PROXY:/ }, 'a misspelt name is not ignored')
  t.equal(loadConfig({ TRUSTED_PROXIES: ' 10.0.0.0/8 , ::1 ' }).TRUSTED_PROXIES, ' 10.0.0.0/8 , ::1 ')
})
