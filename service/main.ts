import { pino } from 'pino'
import { ConfigError, describeConfig, loadConfig, missingNodeFlags } from '../config/index.js'

// Only configuration and logging load before the configuration is checked: the service's
// modules (about 1,000 files with their libraries) load after it, so a bad variable is
// reported at once.

/** sysexits.h EX_TEMPFAIL: a restart is expected to fix it. */
const EXIT_TEMPFAIL = 75
/** sysexits.h EX_DATAERR: stored data is damaged, and a restart would read the same bytes. */
const EXIT_DATAERR = 65
/** sysexits.h EX_CONFIG. */
const EXIT_CONFIG = 78

/** Process entry: configuration, logging, signals. `--help` lists every variable. */
async function main(): Promise<void> {
  if (process.argv.includes('--help')) {
    process.stdout.write(`Signal ingest gateway. Environment variables:\n${describeConfig()}\n`)
    return
  }
  const config = loadConfig()
  // Every line names the role, so the logs of several processes can be told apart when collected together.
  const logger = pino({ level: config.LOG_LEVEL, base: { service: 'signal-ingest-gateway', role: config.ROLE } })
  const missing = missingNodeFlags()
  if (missing.length > 0) {
    logger.warn({ missing }, 'started without the V8 flags of `npm start`: expect longer latency tails (config/node-flags.ts)')
  }
  const { startService } = await import('./service.js')
  const service = await startService(config, logger)
  let stopping = false
  const stop = (reason: string, exitCode: number) => {
    if (stopping) return
    stopping = true
    logger.info({ reason }, 'draining')
    service.stop().then(
      () => {
        logger.info({ exit_code: exitCode }, 'stopped')
        process.exit(exitCode)
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => stop('SIGTERM', 0))
  process.on('SIGINT', () => stop('SIGINT', 0))
  // A failed journal write: drain (requests in flight get 503, none a false 202) and exit
  // so the supervisor restarts the process (systemd unit: Restart=on-failure), whose
  // recovery truncates the torn tail and rebuilds the state from what reached the disk.
  void service.fatal.then(() => stop('signal log failure', EXIT_TEMPFAIL))
}

/** The error with its causes, each on its own line: a wrapped NATS or file-system failure names the underlying one. */
function describeFailure(err: unknown): string {
  const lines: string[] = []
  for (let e: unknown = err, depth = 0; e !== undefined && depth < 5; e = e instanceof Error ? e.cause : undefined, depth++) {
    lines.push(depth === 0 ? (e instanceof Error ? (e.stack ?? e.message) : String(e)) : `caused by: ${e instanceof Error ? e.message : String(e)}`)
  }
  return lines.join('\n')
}

main().catch(async (err: unknown) => {
  // A configuration error (a variable, or the admin-token file) exits 78, EX_CONFIG: the
  // systemd unit does not restart it, since a restart would not fix it.
  if (err instanceof ConfigError) {
    process.stderr.write(`configuration error: ${err.message}\n`)
    process.exit(EXIT_CONFIG)
  }
  // Loaded by now whenever the error came from the service: the import costs nothing then.
  const { DataDirLockedError, PortInUseError, ConsumerHeldError, isLogError, RegistryError } = await import('./start-errors.js')
  // Damaged acknowledged data (the signal log or the registry) exits 65, EX_DATAERR, not
  // restarted either: starting would lose what it holds, and a restart reads the same bytes.
  if (isLogError(err, 'log_corrupt') || err instanceof RegistryError) {
    process.stderr.write(`damaged data in DATA_DIR, not started (a restart would read the same bytes): ${err.message}\n`)
    process.exit(EXIT_DATAERR)
  }
  // Another process holds what this one needs (its folder, its port, the recorder's consumer on NATS).
  if (err instanceof DataDirLockedError || err instanceof PortInUseError || err instanceof ConsumerHeldError) {
    process.stderr.write(`not started: ${err.message}\n`)
    process.exit(1)
  }
  process.stderr.write(`fatal: ${describeFailure(err)}\n`)
  process.exit(1)
})
