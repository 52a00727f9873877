import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { repoPath } from '../helpers/repo-root.js'

/**
 * The SDK example in the docs is examples/sdk-push.mjs verbatim: every block marked
 * `<!-- example: examples/sdk-push.mjs -->` in docs/ and doc-fragments/ must equal the file,
 * which test/sdk/package-entry.test.ts runs. The docs cannot drift from what runs.
 */

const root = repoPath()
const MARKED = /<!-- example: (\S+) -->\n```[a-z]*\n([\s\S]*?)```\n<!-- \/example -->/g

const pages = ['docs', 'doc-fragments']
  .filter((dir) => existsSync(join(root, dir)))
  .flatMap((dir) => readdirSync(join(root, dir)).filter((f) => f.endsWith('.md')).map((f) => join(dir, f)))

t.test('every marked example block equals its file, and the SDK example is shown somewhere', async (t) => {
  const shown = new Set<string>()
  for (const page of pages) {
    for (const m of readFileSync(join(root, page), 'utf8').matchAll(MARKED)) {
      const [, file, block] = m as unknown as [string, string, string]
      t.equal(block, readFileSync(join(root, file), 'utf8'), `${page}: the block for ${file}`)
      shown.add(file)
    }
  }
  t.ok(shown.has('examples/sdk-push.mjs'), `examples/sdk-push.mjs is shown in ${pages.join(', ')}`)
})
