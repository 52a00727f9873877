import { existsSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { repoPath } from '../helpers/repo-root.js'

/**
 * The built SDK (sdk/dist/index.js, what `@signal-ingest-gateway/sdk` resolves to) and
 * everything it imports, followed file by file into its dependencies: no Node built-in
 * (it must run in browsers and edge runtimes), no TypeBox or other part of the service,
 * and every package it reaches declared in the SDK package's own `dependencies`
 * (sdk/package.json), which declares nothing else.
 */

const root = repoPath()
const pkg = JSON.parse(readFileSync(resolve(root, 'sdk/package.json'), 'utf8')) as { name: string; dependencies: Record<string, string>; exports: Record<string, unknown> }
const dist = resolve(root, 'sdk/dist')
const IMPORT = /(?:^|[\s;}])(?:import|export)\s*(?:[\w*{}\s,$]*?\s*from\s*)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g

/** Package name and subpath of a bare specifier. */
function splitBare(spec: string): [string, string] {
  const parts = spec.split('/')
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string)
  return [name, `.${spec.slice(name.length)}`]
}

/**
 * The file a bare specifier loads, by Node's own resolver (from this folder: the one
 * node_modules tree, where the SDK's dependencies have no nested copies).
 */
const resolveBare = (spec: string): string => fileURLToPath(import.meta.resolve(spec))

t.test('the package exports its entry as built JavaScript with its types, and the repository resolves it from the workspace', async (t) => {
  t.equal(pkg.name, '@signal-ingest-gateway/sdk')
  t.same(pkg.exports['.'], { types: './dist/index.d.ts', default: './dist/index.js' })
  t.ok(existsSync(resolve(dist, 'index.js')), 'built (npm run build)')
  t.ok(existsSync(resolve(dist, 'index.d.ts')), 'declarations built (tsconfig.sdk.json)')
  t.equal(resolveBare('@signal-ingest-gateway/sdk'), resolve(dist, 'index.js'), 'node_modules links the workspace (npm ci)')
  const rootPkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { workspaces: string[] }
  t.same(rootPkg.workspaces, ['sdk'])
})

t.test('the SDK imports no Node built-in, no TypeBox, and only declared dependencies, all the way down', async (t) => {
  const seen = new Set<string>()
  const packages = new Set<string>()
  const offenders: string[] = []
  const queue = [resolve(dist, 'index.js')]
  while (queue.length > 0) {
    const file = queue.pop() as string
    if (seen.has(file)) continue
    seen.add(file)
    const source = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '')
    for (const m of source.matchAll(IMPORT)) {
      const spec = (m[1] ?? m[2]) as string
      if (spec.startsWith('node:') || builtinModules.includes(spec.split('/')[0] as string)) offenders.push(`${file}: ${spec}`)
      else if (spec.startsWith('.')) queue.push(resolve(dirname(file), spec))
      else {
        packages.add(splitBare(spec)[0])
        queue.push(resolveBare(spec))
      }
    }
  }
  t.same(offenders, [], 'no Node built-in anywhere in the graph')
  t.same([...packages].sort(), ['@noble/ed25519', '@noble/hashes'])
  t.same(Object.keys(pkg.dependencies).sort(), [...packages].sort(), 'the package declares exactly what it reaches')
  const outside = [...seen].filter((f) => !f.startsWith(`${dist}/`) && !f.includes('/node_modules/@noble/'))
  t.same(outside, [], 'nothing outside the package and its dependencies')
  t.ok(seen.size > 10, `the walk followed the graph (${seen.size} files)`)
})

t.test('the scan finds what it is looking for (checked on a line of each form)', async (t) => {
  const forms = ["import { a } from 'node:fs';", "export * from 'typebox';", "import 'node:os';", "const m = await import('node:path');", 'import*as x from"./y.js"']
  const found = forms.map((line) => [...line.matchAll(IMPORT)].map((m) => m[1] ?? m[2]))
  t.same(found, [['node:fs'], ['typebox'], ['node:os'], ['node:path'], ['./y.js']])
})
