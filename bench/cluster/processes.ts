import { loadConfig } from '../../config/index.js'
import { freePort, launchGateway, type LaunchedGateway } from '../../harness/gateway-launcher.js'
import type { BenchGateway } from '../ingest/gateway-process.js'

/**
 * The processes of the cluster under test: built gateways (dist/service/main.js) in roles,
 * all with one admin token, on the NATS servers given. The rate limiter is set out of the
 * way as in the ingest benchmark; the signal stream's retention is 1 GiB, so JetStream's
 * reservation of max_bytes on every replica fits a test machine's disk.
 */
export async function startRole(role: 'all' | 'gateway' | 'recorder' | 'delivery', adminToken: string, env: Record<string, string>): Promise<BenchGateway> {
  const gw: LaunchedGateway = await launchGateway({
    port: await freePort(),
    adminToken,
    outputLines: 50,
    env: { LOG_LEVEL: 'warn', INGEST_MAX_RATE_PER_S: '100000', INGEST_MAX_BURST: '100000', STREAM_MAX_PER_RENTAL: '1000', JOURNAL_RETENTION_MAX_BYTES: String(2 ** 30), ROLE: role, ...env },
  })
  return { ...gw, config: loadConfig(gw.env) }
}

export async function stopAll(processes: readonly LaunchedGateway[]): Promise<void> {
  for (const p of processes) {
    await p.stop()
    await p.removeDataDir()
  }
}
