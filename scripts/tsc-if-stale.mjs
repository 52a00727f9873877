#!/usr/bin/env node
// Runs the TypeScript compiler only when its inputs changed since its last success.
//
//   node scripts/tsc-if-stale.mjs build [--force]      tsc -p tsconfig.build.json   (dist/)
//   node scripts/tsc-if-stale.mjs typecheck [--force]  tsc -p tsconfig.test.json     (dist-test/)
//   node scripts/tsc-if-stale.mjs sdk [--force]        tsc -p tsconfig.sdk.json      (sdk/dist/, the SDK package alone)
//
// The typecheck covers every file, the tests included, and compiles them all to dist-test/,
// which is what tap runs: plain JavaScript starts about 1.1 s of CPU sooner per test file
// than TypeScript through a loader (tsx), over 140 files a minute and a half of the suite.
//
// A full `tsc` takes 4-9 s on a 2-core machine even when nothing changed, and `npm start`
// and `npm test` ran one every time. Here the inputs are hashed instead (about 100 ms):
// every .ts file the tsconfig's "include" names, both tsconfig files, package.json and
// package-lock.json (which pins the compiler and the type packages). After a successful
// run the hash goes into a stamp; the next run compiles only if the hash differs.
// Content, not modification times, decides: a `git checkout` or a rebase that leaves
// the text as it was costs no build, and one that changes it always does.
//
// Plain JavaScript with no dependencies, because it runs before anything is built,
// including on a fresh clone where dist/ does not exist (no stamp: it compiles).
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')

const TARGETS = {
  build: {
    tsconfig: 'tsconfig.build.json',
    args: [],
    // The SDK package (sdk/dist/: JavaScript and declarations, browser types only; its inputs
    // are a subset of the build's). Before the bundle: the service imports the signing string
    // from @signal-ingest-gateway/sdk, the workspace link to sdk/, whose exports name sdk/dist/.
    // Then the web pages' scripts, checked with browser types (tsconfig.web.json emits nothing).
    then: ['tsconfig.sdk.json', 'tsconfig.web.json'],
    // The service's entry, bundled in place (scripts/bundle-service.mjs says why); the web pages (scripts/build-web.mjs).
    after: ['scripts/bundle-service.mjs', 'scripts/build-web.mjs'],
    // Inputs besides the tsconfig's: every file under these folders (the pages' HTML and CSS too).
    folders: ['web'],
    // In dist/ itself: deleting dist/ deletes the stamp, so it is rebuilt.
    stamp: 'dist/.build-stamp.json',
    // A build `tsc` rewrites this file every time, so a build that did not go through this
    // script (a bare `npx tsc -p tsconfig.build.json` of other sources) changes its mtime
    // and the stamp no longer vouches for dist/.
    // And the SDK's entry: deleting sdk/dist/ alone rebuilds too.
    outputs: ['dist/service/main.js', 'sdk/dist/index.js'],
  },
  // What the SDK package's prepack runs (`npm pack -w sdk`): the SDK without the service.
  sdk: {
    tsconfig: 'tsconfig.sdk.json',
    args: [],
    then: [],
    after: [],
    folders: [],
    clean: 'sdk/dist',
    stamp: 'sdk/dist/.build-stamp.json',
    outputs: ['sdk/dist/index.js'],
  },
  typecheck: {
    tsconfig: 'tsconfig.test.json',
    args: [],
    then: [],
    after: [],
    folders: [],
    // Emptied before each compile: a test file removed from test/ must not run on from here.
    clean: 'dist-test',
    // In dist-test/ itself: deleting the folder deletes the stamp, so it is compiled again.
    stamp: 'dist-test/.typecheck-stamp.json',
    outputs: [],
  },
}

const EXTRA_INPUTS = ['tsconfig.json', 'tsconfig.build.json', 'tsconfig.sdk.json', 'tsconfig.test.json', 'tsconfig.web.json', 'package.json', 'package-lock.json', 'sdk/package.json', 'scripts/bundle-service.mjs', 'scripts/build-web.mjs']

/** The tsconfig's "include", following "extends" (a relative path) when it has none of its own. */
function includeOf(tsconfigPath) {
  const config = JSON.parse(readFileSync(join(ROOT, tsconfigPath), 'utf8'))
  if (config.include !== undefined) return config.include
  if (typeof config.extends === 'string' && config.extends.startsWith('.')) return includeOf(join(dirname(tsconfigPath), config.extends))
  throw new Error(`${tsconfigPath}: no "include" to read the inputs from`)
}

/**
 * The tsconfig's "exclude", following "extends" like includeOf. Only plain folder paths
 * are understood (sdk/dist: the SDK's output, whose .d.ts files would otherwise count as
 * inputs and make every build stale the moment it wrote them).
 */
function excludeOf(tsconfigPath) {
  const config = JSON.parse(readFileSync(join(ROOT, tsconfigPath), 'utf8'))
  const exclude = config.exclude ?? (typeof config.extends === 'string' && config.extends.startsWith('.') ? excludeOf(join(dirname(tsconfigPath), config.extends)) : [])
  for (const pattern of exclude) {
    if (/[*?{}[\]]/.test(pattern)) throw new Error(`scripts/tsc-if-stale.mjs does not understand the exclude pattern ${JSON.stringify(pattern)}: add it there`)
  }
  return exclude
}

/**
 * The files an "include" list names. Only the two forms this project uses are understood,
 * a file path and `folder/**\/*.ts`; any other pattern is refused rather than guessed at,
 * since a missed input would leave dist/ out of date without a word.
 */
function filesOf(include, exclude) {
  const files = []
  for (const pattern of include) {
    const folder = /^([\w./-]+)\/\*\*\/\*\.ts$/.exec(pattern)?.[1]
    if (folder !== undefined) files.push(...filesUnder(folder, { excluded: new Set(exclude) }))
    else if (!/[*?{}[\]]/.test(pattern)) files.push(pattern)
    else throw new Error(`scripts/tsc-if-stale.mjs does not understand the include pattern ${JSON.stringify(pattern)}: add it there`)
  }
  return files
}

/** Files under `folder`: its .ts files, or every file with `all`; node_modules and excluded paths left out. */
function filesUnder(folder, { all = false, excluded = new Set() } = {}) {
  const out = []
  const walk = (dir) => {
    let entries
    try {
      entries = readdirSync(join(ROOT, dir), { withFileTypes: true })
    } catch (err) {
      if (err.code === 'ENOENT') return // tsc skips an include that matches nothing, too
      throw err
    }
    for (const entry of entries) {
      const path = `${dir}/${entry.name}`
      // tsc leaves node_modules out of wildcard includes, and dist/ holds its own output.
      if (entry.isDirectory() && entry.name !== 'node_modules' && !excluded.has(path)) walk(path)
      else if (entry.isFile() && (all || entry.name.endsWith('.ts'))) out.push(path)
    }
  }
  walk(folder)
  return out
}

/** sha256 over each input's path and content, in a fixed order: an added, removed or renamed file changes it too. */
function inputHash(target) {
  const files = [...new Set([...filesOf(includeOf(target.tsconfig), excludeOf(target.tsconfig)), ...target.folders.flatMap((f) => filesUnder(f, { all: true })), ...EXTRA_INPUTS])].sort()
  const hash = createHash('sha256')
  for (const file of files) {
    hash.update(`${file}\0`)
    hash.update(existsSync(join(ROOT, file)) ? readFileSync(join(ROOT, file)) : '(missing)')
    hash.update('\0')
  }
  return { hash: hash.digest('hex'), files: files.length }
}

/** The outputs' modification times, or undefined when one is missing (never current then). */
function outputMtimes(target) {
  try {
    return target.outputs.map((file) => statSync(join(ROOT, file)).mtimeMs)
  } catch {
    return undefined
  }
}

function readStamp(target) {
  try {
    return JSON.parse(readFileSync(join(ROOT, target.stamp), 'utf8'))
  } catch {
    return undefined
  }
}

const [name, ...flags] = process.argv.slice(2)
const target = TARGETS[name]
if (target === undefined || flags.some((f) => f !== '--force')) {
  console.error('usage: node scripts/tsc-if-stale.mjs build|sdk|typecheck [--force]')
  process.exit(2)
}

const { hash, files } = inputHash(target)
const stamp = readStamp(target)
const mtimes = outputMtimes(target)
if (!flags.includes('--force') && stamp?.hash === hash && mtimes !== undefined && JSON.stringify(stamp.outputMtimesMs) === JSON.stringify(mtimes)) {
  console.error(`${name}: current (${files} inputs unchanged since the last successful run), tsc skipped`)
  process.exit(0)
}

// Removed first: a failed or interrupted compile must not leave an old stamp vouching for new output.
rmSync(join(ROOT, target.stamp), { force: true })
if (target.clean !== undefined) rmSync(join(ROOT, target.clean), { recursive: true, force: true })
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
const t0 = Date.now()
for (const tsconfig of [target.tsconfig, ...target.then]) {
  const run = spawnSync(process.execPath, [tsc, '-p', tsconfig, ...(tsconfig === target.tsconfig ? target.args : [])], { cwd: ROOT, stdio: 'inherit' })
  if (run.status !== 0) process.exit(run.status ?? 1)
}
for (const script of target.after) {
  const run = spawnSync(process.execPath, [join(ROOT, script)], { cwd: ROOT, stdio: 'inherit' })
  if (run.status !== 0) process.exit(run.status ?? 1)
}
// Hashed again after the compile: an edit made while tsc ran leaves the next run stale, not current.
const after = inputHash(target)
if (after.hash === hash) {
  mkdirSync(dirname(join(ROOT, target.stamp)), { recursive: true })
  writeFileSync(join(ROOT, target.stamp), `${JSON.stringify({ hash, outputMtimesMs: outputMtimes(target) ?? null })}\n`)
}
console.error(`${name}: tsc -p ${target.tsconfig}${target.args.map((a) => ` ${a}`).join('')} in ${Date.now() - t0} ms (${relative(ROOT, join(ROOT, target.stamp))} ${after.hash === hash ? 'written' : 'not written: inputs changed meanwhile'})`)
