/**
 * `npm run migrate-to-cluster`: moves the embedded deployment in DATA_DIR into the cluster
 * named by NATS_URL (and CLICKHOUSE_URL, or --recorder-data-dir). Reads the same
 * environment as the service. Exit 0 once moved; 1 when refused (nothing written: fix the
 * cause and run it again); 2 when it failed part-way (run again with --resume); 78 for a
 * configuration the service would refuse too.
 */
import { Command } from 'commander'
import { pino } from 'pino'
import { ConfigError, loadConfig } from '../config/index.js'

const EXIT_REFUSED = 1
const EXIT_PART_WAY = 2
const EXIT_CONFIG = 78

async function main(): Promise<number> {
  const program = new Command('migrate-to-cluster')
    .description('Copy an embedded deployment (DATA_DIR) into an empty cluster (NATS_URL, and CLICKHOUSE_URL or --recorder-data-dir). Stop the embedded gateway first.')
    .option('--recorder-data-dir <dir>', "without CLICKHOUSE_URL: the DATA_DIR of the cluster's recorder, whose embedded engine takes the receipts")
    .option('--resume', 'finish a move that began and was interrupted (the cluster then holds part of it)', false)
    .parse()
  const opts = program.opts<{ recorderDataDir?: string; resume: boolean }>()
  let config
  try {
    config = loadConfig()
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    process.stderr.write(`${err.message}\n`)
    return EXIT_CONFIG
  }
  const logger = pino({ level: 'warn', base: { service: 'signal-ingest-gateway', role: 'migrate-to-cluster' } }, pino.destination(2))
  const { formatReport, migrateToCluster, MigrationError } = await import('./index.js')
  try {
    const report = await migrateToCluster({ config, logger, resume: opts.resume, ...(opts.recorderDataDir !== undefined && { recorderDataDir: opts.recorderDataDir }) })
    process.stdout.write(formatReport(report))
    return 0
  } catch (err) {
    if (err instanceof MigrationError && err.refused) {
      process.stderr.write(`refused (${err.code}): ${err.message}\n`)
      return EXIT_REFUSED
    }
    const code = err instanceof MigrationError ? err.code : 'failed'
    process.stderr.write(`failed part-way (${code}): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\nthe cluster may hold part of the move: run again with --resume to finish it\n`)
    return EXIT_PART_WAY
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
    process.exit(EXIT_PART_WAY)
  },
)
