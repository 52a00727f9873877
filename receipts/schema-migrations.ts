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
 * Brings the schema to the newest of `migrations`, in version order, recording each once
 * applied. Refuses (`schema_too_new`) a store already past what this code knows: an older
 * release would read and write tables it does not understand.
 */
export async function migrate(client: ClickHouseClient, migrations: readonly Migration[]): Promise<{ from: number; to: number }> {
  for (let i = 0; i < migrations.length; i++) {
    if (migrations[i]?.version !== i + 1) throw new Error(`receipt store: migration ${i} has version ${migrations[i]?.version}, expected ${i + 1}`)
  }
  const known = migrations.length
  let from: number
  try {
    await client.command({ query: CREATE_MIGRATIONS_TABLE })
    from = await schemaVersion(client)
  } catch (err) {
    throw toStoreError('reading the schema version', err)
  }
  if (from > known) {
    throw new ReceiptStoreError('schema_too_new', `receipt store: the stored schema is version ${from}, this release knows up to ${known}; run a release that knows it`)
  }
  for (const m of migrations.slice(from)) {
    try {
      for (const statement of m.statements) await client.command({ query: statement })
      await m.apply?.(client)
      await client.insert({ table: 'schema_migrations', values: [{ version: m.version, name: m.name, applied_at: Date.now() }], format: 'JSONEachRow' })
    } catch (err) {
      throw toStoreError(`applying migration ${m.version} (${m.name})`, err)
    }
  }
  return { from, to: Math.max(from, known) }
}
