import type { ClickHouseClient } from '@clickhouse/client'
import { toStoreError } from './clickhouse-errors.js'
import { ReceiptStoreError } from './receipt-store-error.js'

/**
 * A schema change. Its statements must be safe to run again (IF NOT EXISTS, ADD COLUMN IF
 * NOT EXISTS): a process killed between a statement and the row that records the version
 * runs them again at its next start, and two processes starting at once may both run them.
 */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly statements: readonly string[]
  /**
   * Steps that need a decision on what is stored (a table rebuilt only if not yet rebuilt),
   * run after the statements; as safe to run again as they are.
   */
  readonly apply?: (client: ClickHouseClient) => Promise<void>
}

const CREATE_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version UInt32,
  name String,
  applied_at DateTime64(3, 'UTC')
) ENGINE = ReplacingMergeTree ORDER BY version`

/** The highest version recorded (0 on a fresh store). */
export async function schemaVersion(client: ClickHouseClient): Promise<number> {
  const rows = await (await client.query({ query: 'SELECT max(version) AS v FROM schema_migrations', format: 'JSONEachRow' })).json<{ v: number }>()
  return Number(rows[0]?.v ?? 0)
}

/**
 * Taken around the migrations by a process that may start at the same time as others on
 * one ClickHouse server; resolves once this process alone migrates, with how to let the
 * next one in.
 */
export type MigrationLock = () => Promise<() => Promise<void>>

/** The recorded version, or 0 when there is no record of versions yet (a store never opened). */
async function storedVersion(client: ClickHouseClient): Promise<number> {
  const rows = await (await client.query({ query: `SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'`, format: 'JSONEachRow' })).json<{ n: number | string }>()
  return Number(rows[0]?.n ?? 0) === 0 ? 0 : schemaVersion(client)
}

function refuseNewer(from: number, known: number): void {
  if (from > known) {
    throw new ReceiptStoreError('schema_too_new', `receipt store: the stored schema is version ${from}, this release knows up to ${known}; run a release that knows it`)
  }
}

/**
 * Brings the schema to the newest of `migrations`, in version order, recording each once
 * applied. Refuses (`schema_too_new`) a store already past what this code knows: an older
 * release would read and write tables it does not understand.
 *
 * Several processes may start at once on one server. A store already at the newest
 * version is only read. Otherwise the migrations run under `lock` when given, and the
 * version is read again once it is held, so only the first process to hold it migrates
 * and records each version (once), and the others find the work done. Without the lock two
 * processes could run one migration at once, and a table rebuild (copy, exchange, drop)
 * run twice at once can exchange the tables back or truncate the copy that already holds
 * the rows. Without `lock` (one process per store: the embedded engine, or a single
 * process on a server) nothing else migrates at the same time.
 */
export async function migrate(client: ClickHouseClient, migrations: readonly Migration[], lock?: MigrationLock): Promise<{ from: number; to: number }> {
  for (let i = 0; i < migrations.length; i++) {
    if (migrations[i]?.version !== i + 1) throw new Error(`receipt store: migration ${i} has version ${migrations[i]?.version}, expected ${i + 1}`)
  }
  const known = migrations.length
  let from: number
  try {
    from = await storedVersion(client)
  } catch (err) {
    throw toStoreError('reading the schema version', err)
  }
  refuseNewer(from, known)
  if (from === known) return { from, to: known }
  let release: (() => Promise<void>) | undefined
  try {
    release = await lock?.()
  } catch (err) {
    throw new ReceiptStoreError('unavailable', 'receipt store: the lock that lets one process at a time migrate could not be taken', { cause: err })
  }
  try {
    try {
      await client.command({ query: CREATE_MIGRATIONS_TABLE })
      from = await schemaVersion(client)
    } catch (err) {
      throw toStoreError('reading the schema version', err)
    }
    refuseNewer(from, known)
    for (const m of migrations.slice(from)) {
      try {
        for (const statement of m.statements) await client.command({ query: statement })
        await m.apply?.(client)
        await client.insert({ table: 'schema_migrations', values: [{ version: m.version, name: m.name, applied_at: Date.now() }], format: 'JSONEachRow' })
      } catch (err) {
        throw toStoreError(`applying migration ${m.version} (${m.name})`, err)
      }
    }
  } finally {
    await release?.()
  }
  return { from, to: known }
}
