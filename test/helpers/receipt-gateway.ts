import { join } from 'node:path'
import type { LaunchedGateway, LaunchOptions } from '../../harness/gateway-launcher.js'
import { ClickHouseReceiptStore, type ReceiptInput } from '../../receipts/index.js'
import { startTestGateway } from './gateway-process.js'

/**
 * Puts receipts into a running gateway's own store: stops it, opens its DATA_DIR/clickhouse
 * with the real ClickHouseReceiptStore on the real chDB engine in this process, records
 * them (and outcomes and dispute statuses through `more`), closes it and starts the
 * gateway again on the same folder. The recorder that fills the store from the signal
 * log is not part of this branch; this is its store and its write path, not a stand-in.
 * libchdb binds one data folder per process: a test file seeds one gateway's folder only.
 * A gateway on a ClickHouse server (CLICKHOUSE_URL) is seeded through the server while
 * it runs.
 */
export async function seedReceipts(
  t: { teardown(fn: () => unknown): void },
  gw: LaunchedGateway,
  inputs: readonly ReceiptInput[],
  options: { env?: LaunchOptions['env']; more?: (store: ClickHouseReceiptStore) => Promise<void> } = {},
): Promise<LaunchedGateway> {
  const url = gw.env['CLICKHOUSE_URL']
  const onServer = url !== undefined && url !== ''
  if (!onServer) await gw.stop()
  const store = new ClickHouseReceiptStore({ target: onServer ? { kind: 'server', url, requestTimeoutMs: 60_000 } : { kind: 'chdb', path: join(gw.dataDir, 'clickhouse'), maxServerMemoryBytes: 1_000_000_000 } })
  await store.open()
  try {
    for (let i = 0; i < inputs.length; i += 10_000) await store.record(inputs.slice(i, i + 10_000))
    await options.more?.(store)
  } finally {
    await store.close()
  }
  if (onServer && options.env === undefined) return gw
  if (onServer) await gw.stop()
  return startTestGateway(t, { dataDir: gw.dataDir, adminToken: gw.adminToken, env: { ...gw.env, ...options.env } as Record<string, string> })
}

/** A receipt of `sourceId` emitted `ageMs` before now; `n` makes the signal_id unique. */
export function receiptOf(source: { sourceId: string; agentId: string; keyId: string }, n: number, ageMs: number, over: Partial<ReceiptInput> = {}): ReceiptInput {
  const emitted = Date.now() - ageMs
  return {
    source_id: source.sourceId,
    agent_id: source.agentId,
    signal_id: `sig_${String(n).padStart(7, '0')}`,
    key_id: source.keyId,
    token: 'So11111111111111111111111111111111111111112',
    severity: n % 3 === 0 ? 'critical' : 'warning',
    confidence: n % 101,
    note: `note ${n}`,
    test: false,
    emitted_at: new Date(emitted).toISOString(),
    received_at: new Date(emitted + 200).toISOString(),
    ...over,
  }
}
