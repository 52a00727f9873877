import { readFile } from 'node:fs/promises'
import t from 'tap'
import { ERROR_STATUS } from '../../schemas/index.js'

t.test('the README lists every error code with the status it travels with, and no other', async (t) => {
  const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8')
  const section = /### Error codes\n([\s\S]*?)\n### /.exec(readme)?.[1] ?? ''
  const rows = new Map([...section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1] as string, Number(m[2])]))
  t.same(Object.fromEntries(rows), ERROR_STATUS)
})
