/**
 * Renders the API reference from the service's own OpenAPI document with Scalar's renderer
 * (standalone.js, served beside this file). A file rather than an inline script: the page's
 * Content-Security-Policy runs this origin's files only.
 */
interface ScalarGlobal {
  createApiReference(element: Element, configuration: Record<string, unknown>): unknown
}

const scalar = (window as unknown as { Scalar?: ScalarGlobal }).Scalar
const root = document.getElementById('api-reference-root')
if (scalar !== undefined && root !== null) {
  scalar.createApiReference(root, {
    url: '/v1/openapi.json',
    // The default fonts come from Scalar's CDN, which the page's policy does not reach.
    withDefaultFonts: false,
    telemetry: false,
  })
}
