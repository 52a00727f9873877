import { launchGateway, type LaunchedGateway, type LaunchOptions } from '../../harness/gateway-launcher.js'

/**
 * The built service (`dist/service/main.js`, built by `npm test`'s pretest) for one test, killed
 * when the test ends. It logs at info: the tests read its lines, and the launcher its
 * port. Pass `dataDir` to restart on the state of an earlier one.
 */
export async function startTestGateway(
  t: { teardown(fn: () => unknown): void },
  options: Pick<LaunchOptions, 'dataDir' | 'env' | 'adminToken' | 'fileSizeLimitBytes' | 'until'> = {},
): Promise<LaunchedGateway> {
  const gw = await launchGateway({ ...options, env: { LOG_LEVEL: 'info', ...options.env } })
  t.teardown(async () => {
    await gw.kill()
    await gw.removeDataDir()
  })
  return gw
}
