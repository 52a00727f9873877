import { join } from 'node:path'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { ClickHouseReceiptStore, type ReceiptInput } from '../../receipts/index.js'
import { startTestGateway } from './gateway-process.js'

/**
 * Stops `gw`, records `receipts` straight into its receipt store (DATA_DIR/clickhouse, on
 * real chDB in this process) and starts it again on the same data: receipts the recorder
 * would have written, for tests of what reads them. libchdb binds one data folder per
 * process, so a test file seeds one gateway's folder. Signals the gateway accepted may
 * already have their receipts from its recorder; seeding them again writes nothing.
 */
export async function restartWithReceipts(t: { teardown(fn: () => unknown): void }, gw: LaunchedGateway, receipts: readonly ReceiptInput[], env: Record<string, string> = {}): Promise<LaunchedGateway> {
  await gw.stop()
  const store = new ClickHouseReceiptStore({ target: { kind: 'chdb', path: join(gw.dataDir, 'clickhouse'), maxServerMemoryBytes: 1_000_000_000 } })
  await store.open()
  try {
    const result = await store.record(receipts)
    // The gateway's recorder may already have written the receipts of signals it accepted: the same receipts.
    if (result.recorded + result.alreadyRecorded !== receipts.length) throw new Error(`seeding: ${result.recorded} of ${receipts.length} receipts recorded`)
  } finally {
    await store.close()
  }
  return startTestGateway(t, { dataDir: gw.dataDir, adminToken: gw.adminToken, env: { ...gw.env, ...env } })
}

/** The receipt of a signal a gateway accepted, as the recorder makes it from the log record. */
export function receiptOf(src: { sourceId: string; agentId: string; keyId: string }, signal: Record<string, unknown>, answer: { received_at: string }, test = false): ReceiptInput {
  return {
    source_id: src.sourceId,
    agent_id: src.agentId,
    signal_id: signal.signal_id as string,
    key_id: src.keyId,
    token: signal.token as string,
    severity: signal.severity as string,
    confidence: (signal.confidence as number | undefined) ?? null,
    note: (signal.note as string | undefined) ?? null,
    test,
    emitted_at: signal.ts as string,
    received_at: answer.received_at,
  }
}
