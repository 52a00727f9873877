#!/usr/bin/env node
// `npm run test:unit`: the test files that start no gateway process, under tap.
//
//   node scripts/unit-tests.mjs [tap options...]   run them (options go to tap)
//   node scripts/unit-tests.mjs --list             print which files are unit and which are not
//
// Which files: every file `tap list` names (so the "tap" config in package.json decides
// what a test file is, as for `npm test`), minus those that can start the gateway. A file
// can start it only through harness/gateway-launcher.ts, which alone knows where the built
// gateway is (launchGateway, GATEWAY_MAIN), directly or through a helper such as
// test/helpers/gateway-process.ts. So a file is left out when the local modules it imports,
// followed transitively, reach harness/gateway-launcher.ts by a value import (`import type`
// is erased by the compiler and starts nothing).
// Nothing to keep up to date by hand: a new test file is sorted by what it imports.
//
// And it is enforced where it matters: the test processes run with
// scripts/no-gateway-preload.mjs, which makes any spawn of dist/service/main.js throw, so a file
// that reaches the gateway some other way (a path of its own) fails loudly instead.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const LAUNCHER = 'harness/gateway-launcher.ts'
const TAP = join(ROOT, 'node_modules/.bin/tap')

/** `from '…'` of static imports and re-exports, and `import('…')` with a literal: [specifier, type-only]. */
function importsOf(source) {
  const found = []
  const statement = /\b(import|export)\s+([^'";]*?)\s*from\s*['"]([^'"]+)['"]/g
  for (const [, , clause, spec] of source.matchAll(statement)) found.push([spec, isTypeOnly(clause)])
  for (const [, spec] of source.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push([spec, false])
  for (const [, spec] of source.matchAll(/^\s*import\s+['"]([^'"]+)['"]/gm)) found.push([spec, false])
  return found
}

/** `type X`, `type { X }`, or `{ type X, type Y }`: nothing of it is left in the JavaScript. */
function isTypeOnly(clause) {
  if (/^type\b/.test(clause)) return true
  const named = /^\{([^}]*)\}$/.exec(clause.trim())?.[1]
  if (named === undefined) return false
  const names = named.split(',').map((s) => s.trim()).filter((s) => s !== '')
  return names.length > 0 && names.every((s) => s.startsWith('type '))
}

const parsed = new Map()
/** A module's value imports of local .ts files. */
function read(file) {
  if (!parsed.has(file)) {
    const source = readFileSync(join(ROOT, file), 'utf8')
    const local = importsOf(source)
      .filter(([spec, typeOnly]) => !typeOnly && spec.startsWith('.'))
      .map(([spec]) => normalize(join(dirname(file), spec)).replace(/\.js$/, '.ts'))
      .filter((target) => target.endsWith('.ts'))
    parsed.set(file, local)
  }
  return parsed.get(file)
}

/** How `file` reaches the launcher ("test/helpers/gateway-process.ts → harness/gateway-launcher.ts"), or null. */
function startsGateway(file) {
  const from = new Map([[file, null]])
  const queue = [file]
  while (queue.length > 0) {
    const current = queue.shift()
    const chain = () => {
      const path = []
      for (let f = current; f !== file; f = from.get(f)) path.unshift(f)
      return path.join(' → ')
    }
    if (current === LAUNCHER) return chain()
    for (const target of read(current)) {
      if (from.has(target)) continue
      from.set(target, current)
      queue.push(target)
    }
  }
  return null
}

const list = spawnSync(TAP, ['list'], { cwd: ROOT, encoding: 'utf8' })
if (list.status !== 0) {
  process.stderr.write(list.stderr)
  process.exit(list.status ?? 1)
}
const files = list.stdout.split('\n').filter((l) => l.trim() !== '').map((l) => relative(ROOT, join(ROOT, l.trim())))
/** The TypeScript source of a compiled test file tap lists (dist-test/test/x.test.js → test/x.test.ts): the imports are read there. */
const sourceOf = (f) => f.replace(/^dist-test\//, '').replace(/\.js$/, '.ts')
const unit = files.filter((f) => startsGateway(sourceOf(f)) === null)

const args = process.argv.slice(2)
if (args[0] === '--list') {
  for (const f of files) {
    const reason = startsGateway(sourceOf(f))
    console.log(reason === null ? `unit     ${f}` : `gateway  ${f}  (${reason})`)
  }
  process.exit(0)
}
if (unit.length === 0) {
  console.error('no unit test files found')
  process.exit(1)
}
// Through NODE_OPTIONS, not tap's --node-arg, which would replace the "node-arg" of the tap config.
const preload = `--import=${JSON.stringify(join(ROOT, 'scripts/no-gateway-preload.mjs'))}`
const env = { ...process.env, NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} ${preload}`.trim() }
const run = spawnSync(TAP, [...args, ...unit], { cwd: ROOT, stdio: 'inherit', env })
process.exit(run.status ?? 1)
