import { readFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { missingNodeFlags, NODE_FLAGS } from '../../config/index.js'
import { repoPath } from '../helpers/repo-root.js'

/**
 * The V8 flags cannot be set from inside the process, so every launcher repeats them:
 * these checks keep `npm start` and the systemd unit in step with config/node-flags.ts
 * (harness/gateway-launcher.ts, for the tests and the benchmark, imports NODE_FLAGS).
 */

const root = pathToFileURL(repoPath('/')).href

/** The flags between `node` and `dist/service/main.js` in a command line. */
function nodeFlagsOf(command: string): string[] {
  const m = /(?:^|\s)(?:\S*\/)?node((?:\s+--\S+)*)\s+dist\/service\/main\.js\b/.exec(command)
  if (m === null) throw new Error(`no "node … dist/service/main.js" in ${command}`)
  return (m[1] as string).trim().split(/\s+/).filter((f) => f !== '')
}

t.test('npm start passes exactly the flags of NODE_FLAGS', async (t) => {
  const pkg = JSON.parse(await readFile(new URL('package.json', root), 'utf8')) as { scripts: Record<string, string> }
  t.same(nodeFlagsOf(pkg.scripts['start'] as string), NODE_FLAGS)
})

t.test('the systemd unit passes exactly the flags of NODE_FLAGS', async (t) => {
  const unit = await readFile(new URL('deploy/signal-ingest-gateway.service', root), 'utf8')
  const execStart = unit.split('\n').find((line) => line.startsWith('ExecStart='))
  t.ok(execStart, 'the unit has an ExecStart line')
  t.same(nodeFlagsOf((execStart as string).slice('ExecStart='.length)), NODE_FLAGS)
})

t.test('missingNodeFlags names what a launch left out, by flag name', async (t) => {
  t.ok(NODE_FLAGS.length > 0)
  t.same(missingNodeFlags([]), NODE_FLAGS)
  t.same(missingNodeFlags(['--inspect']), NODE_FLAGS)
  t.same(missingNodeFlags([...NODE_FLAGS, '--inspect']), [])
  t.same(missingNodeFlags(['--initial_old_space_size=128', '--min_semi_space_size=8', '--no_allocation_site_pretenuring']), [], 'V8 reads _ and - alike')
  t.same(missingNodeFlags(['--initial-old-space-size=512', '--min-semi-space-size=16', '--no-allocation-site-pretenuring']), [], 'another value is a choice, not an omission')
  t.same(missingNodeFlags(['--initial-old-space-size=128', '--no-allocation-site-pretenuring']), ['--min-semi-space-size=8'], 'each flag is checked on its own')
})
