import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { launchGateway, type LaunchedGateway, type LaunchOptions } from '../../harness/gateway-launcher.js'
import { receiptsEnv, receiptsOnServer } from './receipts-server.js'
import { beforeNatsStops, natsLaunch, testBackend } from './test-backend.js'

/**
 * The built service (`dist/service/main.js`, built by `npm test`'s pretest) for one test, killed
 * when the test ends. It logs at info: the tests read its lines, and the launcher its
 * port. Pass `dataDir` to restart on the state of an earlier one. With
 * SGW_TEST_BACKEND=nats it runs on NATS (test/helpers/test-backend.ts) unless the test
 * gives it a NATS_URL of its own. With SGW_TEST_RECEIPTS=clickhouse-server its receipts
 * are on the test process's ClickHouse stand-in (test/helpers/receipts-server.ts), in a
 * database named after its data folder, unless the test gives it a CLICKHOUSE_URL.
 */
export async function startTestGateway(
  t: { teardown(fn: () => unknown): void },
  options: Pick<LaunchOptions, 'dataDir' | 'env' | 'adminToken' | 'fileSizeLimitBytes' | 'until'> = {},
): Promise<LaunchedGateway> {
  // A folder made here when the receipts' database is named after it.
  const onServer = receiptsOnServer() && options.env?.['CLICKHOUSE_URL'] === undefined
  const ownDir = onServer && options.dataDir === undefined ? await mkdtemp(join(tmpdir(), 'sgw-gateway-')) : undefined
  if (onServer) {
    const dataDir = options.dataDir ?? ownDir!
    options = { ...options, dataDir, env: { ...(await receiptsEnv(dataDir)), ...options.env } }
  }
  const nats = testBackend() === 'nats' && options.env?.['NATS_URL'] === undefined ? await natsLaunch(options) : undefined
  const chosen = nats?.options ?? options
  const removeOwn = async () => {
    if (nats?.ownDataDir !== undefined) await rm(nats.ownDataDir, { recursive: true, force: true })
    if (ownDir !== undefined) await rm(ownDir, { recursive: true, force: true })
  }
  let launched: LaunchedGateway
  try {
    launched = await launchGateway({ ...chosen, env: { LOG_LEVEL: 'info', ...chosen.env } })
  } catch (err) {
    await removeOwn()
    throw err
  }
  const removeDataDir = async () => {
    await launched.removeDataDir()
    await removeOwn()
  }
  const gw: LaunchedGateway = { ...launched, removeDataDir }
  if (nats !== undefined) beforeNatsStops(() => gw.kill())
  t.teardown(async () => {
    await gw.kill()
    await gw.removeDataDir()
  })
  return gw
}
