// Loaded (node --import) into each test process of `npm run test:unit`: starting the built
// gateway (dist/service/main.js) throws there. scripts/unit-tests.mjs picks the files that cannot
// reach the gateway launcher; this catches one that starts the gateway some other way, so
// the unit run stays what it says instead of quietly growing gateway start-ups.
import childProcess from 'node:child_process'
import { syncBuiltinESMExports } from 'node:module'
import { promisify } from 'node:util'

const commandLine = (command, args) => [command, ...(Array.isArray(args) ? args : [])].filter((a) => typeof a === 'string')
const startsGateway = (command, args) => commandLine(command, args).some((a) => /(^|[/\\])dist[/\\]service[/\\]main\.js$/.test(a))

for (const name of ['spawn', 'spawnSync', 'execFile', 'execFileSync', 'fork']) {
  const original = childProcess[name]
  childProcess[name] = function (command, args, ...rest) {
    if (startsGateway(command, args)) {
      throw new Error(
        `npm run test:unit runs only the test files that start no gateway, and this one started ${commandLine(command, args).join(' ')}. ` +
          'Start the gateway through harness/gateway-launcher.ts (or test/helpers/gateway-process.ts), which scripts/unit-tests.mjs recognises, so the file runs with the gateway tests.',
      )
    }
    return original.call(this, command, args, ...rest)
  }
  // execFile's promisified form resolves { stdout, stderr } through this symbol; a plain
  // wrapper would lose it and resolve the stdout string alone.
  const custom = original[promisify.custom]
  if (custom !== undefined) {
    childProcess[name][promisify.custom] = function (command, args, ...rest) {
      if (startsGateway(command, args)) return childProcess[name](command, args, ...rest)
      return custom.call(this, command, args, ...rest)
    }
  }
}
// `import { spawn } from 'node:child_process'` binds the ESM export, which this updates.
syncBuiltinESMExports()
