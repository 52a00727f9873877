#!/usr/bin/env node
/**
 * `sgw`, the gateway's command line: the operator's, creators', renters' and analysts'
 * calls and checks of receipts and the receipt log, with settings from flags or SGW_URL /
 * SGW_TOKEN, --json output, and exit codes scripts can trust (cli/exit-codes.ts). One file per command group in cli/commands/.
 */
import { Command, CommanderError } from 'commander'
import { registerAgent } from './commands/agent.js'
import { registerKey } from './commands/key.js'
import { registerKeygen } from './commands/keygen.js'
import { registerListen } from './commands/listen.js'
import { registerLog } from './commands/log.js'
import { registerPush } from './commands/push.js'
import { registerReceipts } from './commands/receipts.js'
import { registerRental } from './commands/rental.js'
import { registerSource } from './commands/source.js'
import { registerTail } from './commands/tail.js'
import { registerToken } from './commands/token.js'
import { registerVerifyReceipt } from './commands/verify-receipt.js'
import { registerVerifyWebhook } from './commands/verify-webhook.js'
import { registerWebhook } from './commands/webhook.js'
import { CliError, EXIT } from './exit-codes.js'

function program(): Command {
  const p = new Command('sgw')
    .description('the Signal Ingest Gateway from the command line')
    .option('--url <url>', 'the gateway (default: SGW_URL, else http://127.0.0.1:8080)')
    .option('--token <token>', 'the API token: admin, creator or renter (default: SGW_TOKEN)')
    .option('--json', 'print one JSON document (a stream: one JSON object a line)')
    .showHelpAfterError()
    // Usage errors are thrown (exit 2 below) rather than ending the process inside commander.
    .exitOverride()
  for (const register of [registerKeygen, registerToken, registerAgent, registerRental, registerSource, registerKey, registerPush, registerTail, registerListen, registerWebhook, registerVerifyWebhook, registerReceipts, registerVerifyReceipt, registerLog]) register(p)
  return p
}

async function main(): Promise<number> {
  try {
    await program().parseAsync(process.argv)
    return EXIT.done
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here too, with commander's code 0.
      return err.exitCode === 0 ? EXIT.done : EXIT.usage
    }
    if (err instanceof CliError) {
      if (err.message !== '') process.stderr.write(`sgw: ${err.message}\n`)
      return err.exitCode
    }
    process.stderr.write(`sgw: ${(err as Error).stack ?? String(err)}\n`)
    return EXIT.unreachable
  }
}

process.exitCode = await main()
