import { mkdirSync, readFileSync } from 'node:fs'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { DASHBOARD_CSP, REFERENCE_CSP } from '../../gateway/web-pages.js'
import { OPENAPI_FILE, OPENAPI_PLACEHOLDER_URL } from '../../schemas/index.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { repoPath } from '../helpers/repo-root.js'

// The dashboard and the API reference in a real browser (Debian's Chromium, headless)
// against a started gateway, through the flows a creator, a renter and an operator follow.
// One gateway and one browser for the whole file: a Chromium start is the costly part on a
// small machine; each role gets a context of its own (its own sessionStorage).
const ARTIFACTS = repoPath('artifacts', 'web')
mkdirSync(ARTIFACTS, { recursive: true })
const TIMEOUT = 60_000

const gw = await startTestGateway(t)
const src = await provision(gw)
const admin = (path: string, body?: unknown) => call(gw.url, 'POST', path, { token: gw.adminToken, body })
const renterToken = (await admin('/v1/admin/tokens', { role: 'renter', subject: 'dash-renter' })).body.data.token as string
const rental = await admin('/v1/admin/rentals', { renter_id: 'dash-renter', source_id: src.sourceId })
if (rental.status !== 201) throw new Error(JSON.stringify(rental.body))
const rentalId = rental.body.data.rental_id as string
for (const severity of ['info', 'warning', 'critical', 'critical']) {
  const res = await push(gw, src.sign(payload(src.sourceId, { severity })))
  if (res.status !== 202) throw new Error(JSON.stringify(res.body))
}
// A refused push: the creator's ingest errors list it.
await push(gw, src.sign(payload(src.sourceId, { severity: 'nope' })))

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' })
t.teardown(() => browser.close())

interface Watched {
  readonly page: Page
  readonly context: BrowserContext
  /** Content-Security-Policy refusals and page errors the browser reported. */
  readonly problems: string[]
  /** Every URL the page asked for. */
  readonly urls: string[]
}

async function open(path: string): Promise<Watched> {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } })
  const page = await context.newPage()
  page.setDefaultTimeout(TIMEOUT)
  const problems: string[] = []
  const urls: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) problems.push(m.text())
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  page.on('request', (r) => urls.push(r.url()))
  await page.goto(gw.url + path)
  return { page, context, problems, urls }
}

async function signIn(w: Watched, token: string): Promise<void> {
  await w.page.fill('#token', token)
  await w.page.click('#sign-in button[type=submit]')
}

/** The token stays in the tab: in sessionStorage, never in localStorage, a cookie or any URL the page asked for. */
async function tokenKeptInTab(t: Test, w: Watched, token: string): Promise<void> {
  const stored = await w.page.evaluate(() => ({ session: Object.values(sessionStorage), local: localStorage.length, cookie: document.cookie }))
  t.same(stored, { session: [token], local: 0, cookie: '' }, 'the token is in sessionStorage only')
  t.same((await w.context.cookies()).length, 0, 'no cookie was set')
  t.same(w.urls.filter((u) => u.includes(token)), [], 'no URL carries the token')
  t.same(w.urls.filter((u) => !u.startsWith(gw.url)), [], 'every request went to the gateway itself')
}

t.test('the pages are served with a strict Content-Security-Policy and no inline script', async (t) => {
  const page = await fetch(`${gw.url}/dashboard`)
  t.equal(page.status, 200)
  t.equal(page.headers.get('content-security-policy'), DASHBOARD_CSP)
  t.match(page.headers.get('content-type'), /^text\/html/)
  t.notMatch(DASHBOARD_CSP, /unsafe-inline|unsafe-eval|\*/, 'no inline script or style, no other origin')
  t.notMatch(await page.text(), /<script>|<script(?![^>]*\bsrc=)[^>]*>|\son[a-z]+=/i, 'every script is a file; no inline handler')
  const script = await fetch(`${gw.url}/dashboard/app.js`)
  t.same([script.status, script.headers.get('content-type'), script.headers.get('x-content-type-options')], [200, 'text/javascript; charset=utf-8', 'nosniff'])
  const reference = await fetch(`${gw.url}/v1/docs`)
  t.same([reference.status, reference.headers.get('content-security-policy')], [200, REFERENCE_CSP])
  t.match(REFERENCE_CSP, /script-src 'self';/, 'the reference runs this origin\'s scripts only')
  t.equal((await fetch(`${gw.url}/dashboard`, { method: 'POST' })).status, 405)
})

t.test('a creator signs in and sees its sources, key states, the signals per minute by severity, a live feed and its ingest errors', async (t) => {
  const w = await open('/dashboard')
  await signIn(w, src.creatorToken)
  const { page } = w
  await page.waitForSelector(`#sources-table >> text=${src.sourceId}`)
  await page.waitForSelector(`#keys-table >> text=${src.keyId}`)
  t.match(await page.textContent('#keys-table'), /active/)
  // The recorder writes the receipts a moment after the 202s; the view refreshes every 5 s.
  await page.waitForFunction(() => parseInt(document.querySelector('#stats-total')?.textContent ?? '0', 10) >= 4, undefined, { timeout: TIMEOUT })
  t.equal(await page.getAttribute('.chart', 'data-severities'), 'critical,info,warning', 'one line per severity')
  t.ok(await page.$('.chart canvas'), 'the chart is drawn')
  await page.waitForFunction(() => document.querySelectorAll('#feed-table tbody tr').length >= 4)
  t.match(await page.textContent('#feed-table'), /critical/)
  await page.waitForSelector('#ingest-errors-table >> text=invalid_severity')
  await tokenKeptInTab(t, w, src.creatorToken)
  await page.screenshot({ path: `${ARTIFACTS}/creator.png`, fullPage: true })
  t.same(w.problems, [], 'no policy refusal, no page error')
  await page.click('#sign-out')
  t.same(await page.evaluate(() => sessionStorage.length), 0, 'signing out forgets the token')
  t.ok(await page.isVisible('#sign-in'))
  await w.context.close()
})

t.test('a renter sees its rentals, a live feed through a stream ticket, filtered receipts with an export, and its delivery log', async (t) => {
  const w = await open('/dashboard')
  await signIn(w, renterToken)
  const { page } = w
  await page.waitForSelector(`#rentals-table >> text=${rentalId}`)
  await page.waitForFunction(() => document.querySelector('#feed-state')?.textContent === 'live')
  // The stream replays the rental's signals, then carries a new one live.
  await page.waitForFunction(() => document.querySelectorAll('#feed-list li').length >= 4)
  const live = await push(gw, src.sign(payload(src.sourceId, { severity: 'info', token: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' })))
  t.equal(live.status, 202)
  await page.waitForSelector('#feed-list >> text=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed')
  t.ok(w.urls.some((u) => u.includes(`/v1/rentals/${rentalId}/events?ticket=`)), 'the stream was opened with a ticket')

  await page.waitForFunction(() => document.querySelectorAll('#receipts-table tbody tr').length >= 4 || document.querySelector('#receipts-list .empty') !== null)
  await page.fill('#filter-severity', 'critical')
  await page.click('#apply-filters')
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('#receipts-table tbody tr')]
    return rows.length === 2 && rows.every((r) => r.children[1]?.textContent === 'critical')
  })
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')])
  const lines = readFileSync(await download.path(), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l))
  t.same(lines.map((r) => r.severity), ['critical', 'critical'], 'the export holds the filtered receipts')

  await page.waitForSelector('#no-webhook')
  await tokenKeptInTab(t, w, renterToken)
  await page.screenshot({ path: `${ARTIFACTS}/renter.png`, fullPage: true })
  t.same(w.problems, [], 'no policy refusal, no page error')
  await w.context.close()
})

t.test('an operator sees readiness, the recorder lag and delivery health', async (t) => {
  const w = await open('/dashboard')
  await signIn(w, gw.adminToken)
  const { page } = w
  await page.waitForSelector('#readiness-table >> text=ready')
  await page.waitForSelector('#recorder-table >> text=lag (records)')
  await page.waitForSelector('#delivery-table >> text=signals accepted')
  await page.waitForSelector('#delivery-table >> text=webhook dead letters')
  await tokenKeptInTab(t, w, gw.adminToken)
  await page.screenshot({ path: `${ARTIFACTS}/operator.png`, fullPage: true })
  t.same(w.problems, [], 'no policy refusal, no page error')
  await w.context.close()
})

t.test('a token the gateway does not know is refused at sign-in and not kept', async (t) => {
  const w = await open('/dashboard')
  await signIn(w, 'sgw_not_a_token_at_all_0000000000000000')
  await w.page.waitForSelector('#sign-in-error >> text=unauthorized')
  t.same(await w.page.evaluate(() => sessionStorage.length), 0)
  await w.context.close()
})

t.test('the API reference renders the service\'s own OpenAPI document from local files, and that document is the committed one', async (t) => {
  const w = await open('/v1/docs')
  await w.page.waitForSelector('text=Push one signed signal')
  await w.page.screenshot({ path: `${ARTIFACTS}/api-reference.png` })
  t.ok(w.urls.includes(`${gw.url}/v1/openapi.json`), 'it read /v1/openapi.json')
  t.same(w.urls.filter((u) => !u.startsWith(gw.url) && !u.startsWith('data:') && !u.startsWith('blob:')), [], 'nothing from a CDN')
  t.same(w.problems.filter((p) => /script/i.test(p)), [], 'no script refused or failing')
  await w.context.close()
  const served = (await call(gw.url, 'GET', '/v1/openapi.json')).body
  t.same({ ...served, servers: [{ url: OPENAPI_PLACEHOLDER_URL }] }, JSON.parse(readFileSync(repoPath(OPENAPI_FILE), 'utf8')), `${OPENAPI_FILE} is what the service serves but for its server (npm run openapi writes it again)`)
})
