import { rm } from 'node:fs/promises'
import { launchGateway, type LaunchedGateway, type LaunchOptions } from '../../harness/gateway-launcher.js'
import { beforeNatsStops, natsLaunch, testBackend } from './test-backend.js'

/**
 * The built service (`dist/service/main.js`, built by `npm test`'s pretest) for one test, killed
 * when the test ends. It logs at info: the tests read its lines, and the launcher its
 * port. Pass `dataDir` to restart on the state of an earlier one. With
 * SGW_TEST_BACKEND=nats it runs on NATS (test/helpers/test-backend.ts) unless the test
 * gives it a NATS_URL of its own.
 */
export async function startTestGateway(
  t: { teardown(fn: () => unknown): void },
  options: Pick<LaunchOptions, 'dataDir' | 'env' | 'adminToken' | 'fileSizeLimitBytes' | 'until'> = {},
): Promise<LaunchedGateway> {
  const nats = testBackend() === 'nats' && options.env?.['NATS_URL'] === undefined ? await natsLaunch(options) : undefined
  const chosen = nats?.options ?? options
  const removeOwn = async () => {
    if (nats?.ownDataDir !== undefined) await rm(nats.ownDataDir, { recursive: true, force: true })
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
