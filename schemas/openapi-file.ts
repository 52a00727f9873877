import { openApiDocument } from './openapi.js'

/**
 * The OpenAPI document as committed in the repository (docs/openapi.json), for readers and
 * tools that do not run the service: the same document the service serves at
 * /v1/openapi.json, with a placeholder server URL in place of the service's own.
 * `npm run openapi` writes it; test/docs/openapi-file.test.ts fails when it drifts.
 */
export const OPENAPI_FILE = 'docs/openapi.json'
export const OPENAPI_PLACEHOLDER_URL = 'https://gateway.example'

/** The file's text: two-space JSON and a final newline. */
export function openApiFileText(): string {
  return `${JSON.stringify(openApiDocument(OPENAPI_PLACEHOLDER_URL), null, 2)}\n`
}
