import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@clickhouse/client'
import { ClickHouseReceiptStore, type ClickHouseTarget, type ReceiptInput } from '../../receipts/index.js'
import { receiptsOnServer, standIn } from './receipts-server.js'

const require = createRequire(import.meta.url)

/**
 * A receipt store on real chDB in a throwaway folder. libchdb binds one data folder per
 * process, so a test file opens one folder and its tests share it (each on source ids of
 * its own, or after `truncate`); tap runs every file in a process of its own. With
 * SGW_TEST_RECEIPTS=clickhouse-server the stores open on the ClickHouse stand-in serving
 * this very folder (test/helpers/receipts-server.ts), so the store goes over HTTP while a
 * test's own look at the folder (`path`) still sees what it wrote.
 */
export async function chdbFolder(t: { teardown(fn: () => unknown): void }): Promise<{
  path: string
  open: () => Promise<ClickHouseReceiptStore>
  /** Empties the receipts and their id look-up, through a second connection to the same engine. */
  truncate: () => Promise<void>
}> {
  const dir = await mkdtemp(join(tmpdir(), 'receipts-test-'))
  const path = join(dir, 'clickhouse')
  const opened: ClickHouseReceiptStore[] = []
  t.teardown(async () => {
    for (const s of opened) await s.close()
    await rm(dir, { recursive: true, force: true })
  })
  const target: ClickHouseTarget = receiptsOnServer()
    ? { kind: 'server', url: (await standIn(path)).url, requestTimeoutMs: 60_000 }
    : { kind: 'chdb', path, maxServerMemoryBytes: 1_000_000_000 }
  return {
    path,
    async open() {
      const store = new ClickHouseReceiptStore({ target })
      opened.push(store)
      await store.open()
      return store
    },
    async truncate() {
      const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
      const client = createClient({ connection: createChdbConnection({ path }) as never })
      try {
        await client.command({ query: 'TRUNCATE TABLE receipts' })
        await client.command({ query: 'TRUNCATE TABLE receipt_ids' })
      } finally {
        await client.close()
      }
    },
  }
}

/** A receipt input with plausible fields; `n` makes the signal_id and the times. */
export function receiptInput(n: number, over: Partial<ReceiptInput> = {}): ReceiptInput {
  const emitted = 1_735_689_600_000 + n * 1000
  return {
    source_id: 'src-1',
    agent_id: 'agent-1',
    signal_id: `sig-${String(n).padStart(6, '0')}`,
    key_id: 'key-1',
    token: `0x${(n % 16).toString(16).repeat(40)}`,
    severity: 'high',
    confidence: n % 101,
    note: `note ${n}`,
    test: false,
    emitted_at: new Date(emitted).toISOString(),
    received_at: new Date(emitted + 250).toISOString(),
    ...over,
  }
}
