#!/usr/bin/env node
// Builds the web pages the service serves (gateway/web-pages.ts) into dist/web/:
//
//   dist/web/dashboard/      index.html, app.js and app.css, bundled from web/dashboard/
//                            (uPlot, the chart, bundled in: no CDN at run time)
//   dist/web/api-reference/  index.html, init.js (from web/api-reference/) and Scalar's
//                            standalone.js, copied from node_modules as its release ships it
//
// Scripts only as files, never inline: the pages' Content-Security-Policy allows this
// origin's files and nothing else.
import { buildSync } from 'esbuild'
import { copyFileSync, mkdirSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const OUT = join(ROOT, 'dist/web')

rmSync(OUT, { recursive: true, force: true })
mkdirSync(join(OUT, 'dashboard'), { recursive: true })
mkdirSync(join(OUT, 'api-reference'), { recursive: true })

const browser = { absWorkingDir: ROOT, bundle: true, platform: 'browser', target: 'es2022', format: 'iife', minify: true, sourcemap: false, logLevel: 'warning' }
// app.ts imports its CSS (its own and uPlot's): esbuild writes them as app.css beside app.js.
buildSync({ ...browser, entryPoints: ['web/dashboard/app.ts'], outfile: join(OUT, 'dashboard/app.js') })
buildSync({ ...browser, entryPoints: ['web/api-reference/init.ts'], outfile: join(OUT, 'api-reference/init.js') })
copyFileSync(join(ROOT, 'web/dashboard/index.html'), join(OUT, 'dashboard/index.html'))
copyFileSync(join(ROOT, 'web/api-reference/index.html'), join(OUT, 'api-reference/index.html'))
// The package exports no path to this file (nor its package.json), so it is taken from node_modules directly.
copyFileSync(join(ROOT, 'node_modules/@scalar/api-reference/dist/browser/standalone.js'), join(OUT, 'api-reference/standalone.js'))
