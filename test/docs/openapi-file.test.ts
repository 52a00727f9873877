import { readFileSync } from 'node:fs'
import t from 'tap'
import { OPENAPI_FILE, OPENAPI_PLACEHOLDER_URL, openApiDocument, openApiFileText } from '../../schemas/index.js'
import { repoPath } from '../helpers/repo-root.js'

t.test('docs/openapi.json is the document the service generates, with the placeholder server URL (npm run openapi writes it)', async (t) => {
  const committed = readFileSync(repoPath(OPENAPI_FILE), 'utf8')
  // The objects first, for a readable difference; then the text, which the script writes byte for byte.
  t.same(JSON.parse(committed), openApiDocument(OPENAPI_PLACEHOLDER_URL), `${OPENAPI_FILE} holds the generated document (npm run openapi writes it again)`)
  t.equal(committed, openApiFileText(), `${OPENAPI_FILE} is byte for byte as npm run openapi writes it`)
})
