import { loadConfig, type Config } from '../../config/index.js'
import { freePort, launchGateway, type LaunchedGateway } from '../../harness/gateway-launcher.js'
import { GATEWAY_NODE_ARGS } from './options.js'

/** Lines of gateway output kept to explain a failure. */
const OUTPUT_LINES = 50

export interface BenchGateway extends LaunchedGateway {
  /** The configuration the gateway runs with, as its own loader reads it. */
  readonly config: Config
}

/**
 * The gateway under test, with the bench's defaults overridden by `env`. The port is
 * picked here rather than read from the log, because LOG_LEVEL=warn keeps the gateway
 * from writing a line per request into a pipe that could fill and stall it.
 */
export async function startBenchGateway(env: Record<string, string> = {}): Promise<BenchGateway> {
  // The bench's sources declare the schema's highest max_rate (provision.ts), so the
  // rate limiter never answers for the gateway.
  const defaults = { LOG_LEVEL: 'warn', INGEST_MAX_RATE_PER_S: '100000', INGEST_MAX_BURST: '100000' }
  const gw = await launchGateway({ port: await freePort(), env: { ...defaults, ...env }, nodeArgs: GATEWAY_NODE_ARGS, outputLines: OUTPUT_LINES })
  // The gateway's own loader: the printed configuration is exactly what it runs with.
  return { ...gw, config: loadConfig(gw.env) }
}
