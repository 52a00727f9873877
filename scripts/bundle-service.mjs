#!/usr/bin/env node
// Bundles the service's entry (dist/service/main.js, compiled by tsc) into one file in place,
// with the verify worker beside it as dist/service/verify-worker.js.
//
// Why: as compiled, a start loads about 1,000 module files (683 of them TypeBox's), and
// resolving and compiling them was 2.5 s of CPU of a 4.3 s start on a 2-core machine, which
// every process of a cluster, every restart and every integration test pays. Bundled, the
// same start loads one file and the few packages below. docs/development.md has the figures.
//
// Left outside the bundle: native addons (loaded from node_modules by path), and packages
// that start worker threads from files of their own (piscina, pino's transports).
import { buildSync } from 'esbuild'
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const EXTERNAL = ['uWebSockets.js', 'chdb', 'sodium-native', 'piscina', 'pino', 'thread-stream']

/** The compiled entry and worker, bundled under the same names in dist/service/: the pool finds its worker next to the code that starts it. */
const ENTRIES = [
  { in: 'dist/service/main.js', out: 'main' },
  { in: 'dist/pipeline/verify/verify-worker.js', out: 'verify-worker' },
]
const BANNER = "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);"

for (const entry of ENTRIES) {
  if (!existsSync(join(ROOT, entry.in))) throw new Error(`${entry.in} is missing: run tsc first`)
}
// The entry is bundled in place, so a second run would bundle the bundle: tsc's output comes first.
if (readFileSync(join(ROOT, ENTRIES[0].in), 'utf8').startsWith(BANNER)) {
  console.error(`${ENTRIES[0].in} is bundled already: \`npm run build\` compiles and bundles it again`)
  process.exit(1)
}
// The chunks of the last bundle (esbuild names them name-HASH.js), so old ones do not pile up.
for (const file of readdirSync(join(ROOT, 'dist/service'))) {
  if (/^[\w-]+-[A-Z0-9]{8}\.js(\.map)?$/.test(file)) rmSync(join(ROOT, 'dist/service', file))
}

buildSync({
  absWorkingDir: ROOT,
  entryPoints: ENTRIES,
  outdir: 'dist/service',
  allowOverwrite: true,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  // The service itself in a chunk of its own, loaded after the configuration is checked
  // (service/main.ts), so a configuration error is reported without parsing it.
  splitting: true,
  // Beside the entry, where the verify pool looks for its worker (./verify-worker.js).
  chunkNames: '[name]-[hash]',
  external: EXTERNAL,
  // Bundled CommonJS packages call require(); an ES module has none of its own.
  banner: { js: BANNER },
  // Stack traces name the TypeScript sources under --enable-source-maps (tsc's maps are followed).
  sourcemap: 'linked',
  logLevel: 'warning',
})
