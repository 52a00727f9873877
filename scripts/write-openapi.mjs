#!/usr/bin/env node
// Writes docs/openapi.json: the OpenAPI document the service serves at /v1/openapi.json,
// with a placeholder server URL (schemas/openapi-file.ts). Run through `npm run openapi`,
// which builds first: the document is generated from the compiled schemas in dist/.
// test/docs/openapi-file.test.ts fails while the committed file differs from it.
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const { OPENAPI_FILE, openApiFileText } = await import(join(ROOT, 'dist/schemas/openapi-file.js'))
writeFileSync(join(ROOT, OPENAPI_FILE), openApiFileText())
console.error(`${OPENAPI_FILE} written`)
