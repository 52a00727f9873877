import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The repository's root folder, wherever this file runs from: test/helpers/ as
 * TypeScript, or dist-test/test/helpers/ as the JavaScript tap runs. A path relative to a
 * test's own file would point into dist-test/ there, where the docs, fixtures and builds
 * are not.
 */
function findRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'tsconfig.test.json'))) return dir
    if (dirname(dir) === dir) throw new Error('the repository root (package.json and tsconfig.test.json) was not found above test/helpers')
  }
}

export const REPO_ROOT = findRoot()

/** A path under the repository's root. */
export const repoPath = (...parts: string[]): string => join(REPO_ROOT, ...parts)
