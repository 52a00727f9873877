import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@clickhouse/client'
import tap from 'tap'
import { startClickHouseStandIn, type ClickHouseStandIn } from '../../harness/clickhouse-standin.js'

/**
 * Where the receipts of this test process live: the embedded engine (chDB) each store or
 * gateway opens on its folder, or a ClickHouse server when the process runs with
 * SGW_TEST_RECEIPTS=clickhouse-server (the files under test/on-clickhouse-server/ set it,
 * then import a suite, so its assertions run on the server path, CLICKHOUSE_URL). The
 * server is the stand-in of harness/clickhouse-standin.ts, one per test process (libchdb
 * binds one folder per process), started on first use and stopped when the file ends.
 * Each gateway gets a database of its own on it, named after its data folder, so a
 * gateway restarted on its folder finds its receipts and two gateways of a file do not
 * share them.
 */
export function receiptsOnServer(): boolean {
  const value = process.env['SGW_TEST_RECEIPTS'] ?? ''
  if (value === '' || value === 'embedded') return false
  if (value === 'clickhouse-server') return true
  throw new Error(`SGW_TEST_RECEIPTS=${JSON.stringify(value)}: expected embedded or clickhouse-server`)
}

let shared: Promise<ClickHouseStandIn> | undefined

/** The test process's stand-in, on `path` if it is the first use (a throwaway folder otherwise). */
export function standIn(path?: string): Promise<ClickHouseStandIn> {
  shared ??= (async () => {
    const dir = path === undefined ? await mkdtemp(join(tmpdir(), 'sgw-clickhouse-')) : undefined
    const server = await startClickHouseStandIn({ path: path ?? join(dir!, 'clickhouse'), user: 'sgw', password: randomBytes(12).toString('hex') })
    tap.teardown(async () => {
      await server.close()
      if (dir !== undefined) await rm(dir, { recursive: true, force: true })
    })
    return server
  })()
  return shared
}

/** Statements the stand-in ran so far (0 if none was started): a wrapper checks its suite used it. */
export async function standInStatements(): Promise<number> {
  return shared === undefined ? 0 : (await shared).statements()
}

/** A CLICKHOUSE_URL on the stand-in naming a database of its own, created now. */
export async function standInDatabaseUrl(name: string): Promise<string> {
  const server = await standIn()
  const database = `db_${createHash('sha256').update(name).digest('hex').slice(0, 16)}`
  const client = createClient({ url: server.url })
  try {
    await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` })
  } finally {
    await client.close()
  }
  return `${server.url}/${database}`
}

/** CLICKHOUSE_URL for a gateway of `dataDir` when receipts live on the server; nothing otherwise. */
export async function receiptsEnv(dataDir: string): Promise<Record<string, string>> {
  return receiptsOnServer() ? { CLICKHOUSE_URL: await standInDatabaseUrl(dataDir) } : {}
}
