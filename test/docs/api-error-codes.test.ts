import { readFile } from 'node:fs/promises'
import t from 'tap'
import { ERROR_STATUS } from '../../schemas/index.js'
import { repoPath } from '../helpers/repo-root.js'

t.test('docs/api.md lists every error code with the status it travels with, and no other', async (t) => {
  const page = await readFile(repoPath('docs/api.md'), 'utf8')
  const section = /^## Error codes\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(page)?.[1] ?? ''
  const rows = [...section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1] as string, Number(m[2])] as const)
  t.ok(rows.length > 0, 'the section has a table of codes')
  t.equal(new Set(rows.map(([code]) => code)).size, rows.length, 'each code has one row')
  t.same(Object.fromEntries(rows), ERROR_STATUS)
})
