import { execFile as execFileCb } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { parsePrometheusText } from '../helpers/prometheus-text.js'
import { repoPath } from '../helpers/repo-root.js'

/**
 * The observability files against a started gateway (ROLE=all, tracing on towards a
 * small OTLP/HTTP receiver here): every metric the alert rules and the Grafana
 * dashboard name is on its /metrics page; promtool accepts the rules and the Prometheus
 * configuration; and the spans of one signal arrive with their names and parent links
 * (ingest > signal_log.append, recorder.batch > receipt_store.insert, webhook.deliver),
 * the webhook delivery carrying a traceparent that names its span.
 */

const execFile = promisify(execFileCb)
const read = (path: string) => readFileSync(repoPath(path), 'utf8')

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly attributes?: { key: string; value: Record<string, unknown> }[]
}
interface OtlpExport {
  resourceSpans: { resource: { attributes: { key: string; value: { stringValue?: string } }[] }; scopeSpans: { spans: OtlpSpan[] }[] }[]
}

// The OTLP/HTTP receiver: JSON bodies on /v1/traces, as the exporter sends them.
const spans: OtlpSpan[] = []
const serviceNames = new Set<string>()
const otlpProblems: string[] = []
const collector = createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
      otlpProblems.push(`${req.method} ${req.url} ${req.headers['content-type']}`)
      return res.writeHead(400).end()
    }
    const body = JSON.parse(Buffer.concat(chunks).toString()) as OtlpExport
    for (const rs of body.resourceSpans) {
      for (const a of rs.resource.attributes) if (a.key === 'service.name' && a.value.stringValue !== undefined) serviceNames.add(a.value.stringValue)
      for (const ss of rs.scopeSpans) spans.push(...ss.spans)
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
  })
})
await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { collector.closeAllConnections(); collector.close(() => resolve()) }))

// The renter's receiver, keeping each delivery's headers.
const deliveries: IncomingHttpHeaders[] = []
const receiver = createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    deliveries.push(req.headers)
    res.writeHead(204).end()
  })
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { receiver.closeAllConnections(); receiver.close(() => resolve()) }))

const gw = await startTestGateway(t, {
  env: {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
    OTEL_SERVICE_NAME: 'sgw-under-test',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    RECORDER_FLUSH_MS: '20',
  },
})

const until = async (what: () => boolean, label: string, ms = 30_000) => {
  const end = Date.now() + ms
  while (!what()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${label}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** Metric names in PromQL text: the gateway's own and the process and Node.js ones prom-client adds. */
const METRIC = /\b(?:sgw|process|nodejs)_[a-z0-9_]+\b/g
const metricNames = (exprs: string[]) => [...new Set(exprs.flatMap((e) => e.match(METRIC) ?? []))].sort()

function ruleExprs(): string[] {
  const rules = parseYaml(read('deploy/prometheus/alert-rules.yml')) as { groups: { rules: { alert: string; expr: string }[] }[] }
  return rules.groups.flatMap((g) => g.rules.map((r) => r.expr))
}

/** Every `expr` and templating query of the dashboard. */
function dashboardExprs(): string[] {
  const out: string[] = []
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk)
    else if (typeof v === 'object' && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        if ((k === 'expr' || k === 'definition') && typeof x === 'string') out.push(x)
        else walk(x)
      }
    }
  }
  walk(JSON.parse(read('deploy/grafana/dashboards/signal-ingest-gateway.json')))
  return out
}

t.test('every metric the alert rules and the dashboard name is on the /metrics page of a ROLE=all process', async (t) => {
  const page = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  t.equal(page.status, 200)
  const families = parsePrometheusText(await page.text())
  /** A sample name's family: a histogram's _bucket, _sum and _count are its own. */
  const exported = (name: string) => families.has(name) || (/_(bucket|sum|count)$/.test(name) && families.get(name.replace(/_(bucket|sum|count)$/, ''))?.type === 'histogram')
  for (const [file, exprs] of [['alert rules', ruleExprs()], ['dashboard', dashboardExprs()]] as const) {
    const names = metricNames(exprs)
    t.ok(names.length >= 10, `${file}: ${names.length} metrics named`)
    t.same(names.filter((n) => !exported(n)), [], `${file}: every metric it names is exported`)
  }
  // The gateway's own metrics all have a panel (a new metric gets one, or is left out here on purpose).
  const own = [...families.keys()].filter((n) => n.startsWith('sgw_')).sort()
  const shown = new Set(metricNames(dashboardExprs()).map((n) => n.replace(/_(bucket|sum|count)$/, '')))
  t.same(own.filter((n) => !shown.has(n)), [], 'every sgw_ metric is on the dashboard')
})

t.test('the names are checked against the page (the check itself)', async (t) => {
  t.same(metricNames(['sum(rate(sgw_nope_total[5m])) / nodejs_heap_size_used_bytes and up == 0']), ['nodejs_heap_size_used_bytes', 'sgw_nope_total'])
})

t.test('promtool accepts the alert rules and the Prometheus configuration', async (t) => {
  const rules = await execFile('promtool', ['check', 'rules', repoPath('deploy/prometheus/alert-rules.yml')])
  t.match(rules.stdout, /SUCCESS: \d+ rules found/)
  const config = await execFile('promtool', ['check', 'config', '--syntax-only', repoPath('deploy/prometheus/prometheus.yml')])
  t.match(config.stdout, /SUCCESS/)
  // And it refuses a broken expression, so the check above is a real one.
  const dir = mkdtempSync(join(tmpdir(), 'rules-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'broken.yml'), read('deploy/prometheus/alert-rules.yml').replace(/expr: up\{/, 'expr: sum(up{'))
  const broken = await execFile('promtool', ['check', 'rules', join(dir, 'broken.yml')]).then(() => 0, (e: { code: number }) => e.code)
  t.not(broken, 0, 'an unbalanced expression is refused')
})

t.test('tracing: the spans of one signal, from its push to its webhook, with their parents; the delivery carries its traceparent', async (t) => {
  const src = await provision(gw)
  const renter = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'renter:traced' } })).body.data.token as string
  const rental = (await call(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, body: { renter_id: 'renter:traced', source_id: src.sourceId } })).body.data
  const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`
  t.equal((await call(gw.url, 'PUT', `/v1/rentals/${rental.rental_id}/webhook`, { token: renter, body: { url: hook } })).status, 200)

  const res = await push(gw, src.sign(payload(src.sourceId)))
  t.equal(res.status, 202)
  await until(() => deliveries.some((h) => h['traceparent'] !== undefined), 'a traced webhook delivery')
  await until(() => ['ingest', 'signal_log.append', 'recorder.batch', 'receipt_store.insert', 'webhook.deliver'].every((n) => spans.some((s) => s.name === n)), 'the five span names')
  t.same(otlpProblems, [], 'every export was OTLP/JSON on /v1/traces')
  t.ok(serviceNames.has('sgw-under-test'), 'service.name is OTEL_SERVICE_NAME')

  const byId = new Map(spans.map((s) => [s.spanId, s]))
  const parentOf = (s: OtlpSpan) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined)
  const appends = spans.filter((s) => s.name === 'signal_log.append')
  t.ok(appends.length >= 1)
  for (const a of appends) {
    const parent = parentOf(a)
    t.equal(parent?.name, 'ingest', 'a log append is a child of its ingest span')
    t.equal(parent?.traceId, a.traceId, 'in the same trace')
  }
  t.ok(spans.some((s) => s.name === 'ingest' && s.attributes?.some((a) => a.key === 'http.response.status_code' && a.value['intValue'] !== undefined && Number(a.value['intValue']) === 202)), 'an ingest span ends with its 202')
  for (const insert of spans.filter((s) => s.name === 'receipt_store.insert')) t.equal(parentOf(insert)?.name, 'recorder.batch', 'an insert is a child of its batch')
  t.ok(spans.filter((s) => s.name === 'ingest' || s.name === 'recorder.batch' || s.name === 'webhook.deliver').every((s) => !s.parentSpanId), 'ingest, batches and deliveries start traces')

  const traceparent = String(deliveries.find((h) => h['traceparent'] !== undefined)?.['traceparent'])
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/.exec(traceparent)
  t.ok(m, `a W3C traceparent: ${traceparent}`)
  t.not(m?.[1], '0'.repeat(32), 'a real trace id')
  const deliver = spans.find((s) => s.name === 'webhook.deliver' && s.spanId === m?.[2])
  t.ok(deliver, 'the traceparent names the webhook.deliver span of that attempt')
  t.equal(deliver?.traceId, m?.[1])
})
