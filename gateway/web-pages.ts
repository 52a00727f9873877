import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { ApiError } from '../schemas/index.js'
import { getRoute, type JsonRoutesParts } from './http/json-route.js'

/**
 * The dashboard's Content-Security-Policy: its own script and style files and nothing
 * else. No inline script or style can run (an injected `<script>` or `onclick=` is
 * refused by the browser), requests go to this origin only, and no other site may frame
 * the page. The page reads the API with the token from the tab's sessionStorage in an
 * Authorization header, never in a URL or a cookie, so nothing of it reaches logs or
 * other sites.
 */
export const DASHBOARD_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/**
 * The API reference's policy: the same, except that Scalar's renderer writes its styles
 * into `<style>` elements (style-src 'unsafe-inline', styles only: scripts stay this
 * origin's files) and draws some icons as data: and blob: images and fonts.
 */
export const REFERENCE_CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const HTML = 'text/html; charset=utf-8'
const JS = 'text/javascript; charset=utf-8'
const CSS = 'text/css; charset=utf-8'

/** Each page and asset: its path, its file under dist/web/ (scripts/build-web.mjs writes them) and its type. */
export const WEB_FILES: readonly { readonly path: string; readonly file: string; readonly type: string; readonly csp: string }[] = [
  { path: '/dashboard', file: 'dashboard/index.html', type: HTML, csp: DASHBOARD_CSP },
  { path: '/dashboard/app.js', file: 'dashboard/app.js', type: JS, csp: DASHBOARD_CSP },
  { path: '/dashboard/app.css', file: 'dashboard/app.css', type: CSS, csp: DASHBOARD_CSP },
  { path: '/v1/docs', file: 'api-reference/index.html', type: HTML, csp: REFERENCE_CSP },
  { path: '/v1/docs/init.js', file: 'api-reference/init.js', type: JS, csp: REFERENCE_CSP },
  { path: '/v1/docs/standalone.js', file: 'api-reference/standalone.js', type: JS, csp: REFERENCE_CSP },
]

/**
 * dist/web/, beside the compiled code: one folder up from this module both as tsc emits it
 * (dist/gateway/) and inside the service's bundle (dist/service/).
 */
const WEB_ROOT = fileURLToPath(new URL('../web/', import.meta.url))

/**
 * Registers the dashboard and the API reference. Files are read on their first request and
 * kept (a fixed list of a few megabytes, the reference's renderer most of it), so a
 * process that never serves them never holds them. A file not built (a process started
 * from sources that were not built) is a 404 naming the fix, never a crash.
 */
export function registerWebPages(parts: JsonRoutesParts, root = WEB_ROOT): void {
  for (const page of WEB_FILES) {
    let body: Buffer | undefined
    const headers = {
      'content-security-policy': page.csp,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      // The files change with each build and are small but for one: a revalidation each time keeps a page and its script of one build.
      'cache-control': 'no-cache',
    }
    getRoute(parts, page.path, (reply) => {
      if (body === undefined) {
        try {
          body = readFileSync(root + page.file)
        } catch {
          return reply.fail(new ApiError('not_found', `${page.path} is not built: run npm run build`))
        }
      }
      reply.sendText(200, page.type, body, headers)
    })
  }
}
