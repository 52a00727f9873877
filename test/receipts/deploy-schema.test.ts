import { readFile } from 'node:fs/promises'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import t from 'tap'
import { ClickHouseReceiptStore } from '../../receipts/index.js'
import { MIGRATIONS } from '../../receipts/migrations/index.js'
import { repoPath } from '../helpers/repo-root.js'
import { standInDatabaseUrl } from '../helpers/receipts-server.js'

/**
 * deploy/clickhouse/schema.sql is valid SQL the engine runs, and is what the service's
 * migrations create (tables, columns and types, engines and keys, settings, the view),
 * at the newest version, so a store opened on it changes nothing; the replicated variant
 * is the same statements, ON CLUSTER and with replicated engines. Run on the ClickHouse
 * stand-in (harness/clickhouse-standin.ts), through the client, over HTTP.
 */

/** The statements of a .sql file: comment lines dropped, split at a `;` ending a line. */
async function statementsOf(file: string): Promise<string[]> {
  const text = (await readFile(repoPath(file), 'utf8')).split('\n').filter((l) => !l.trimStart().startsWith('--')).join('\n')
  return text.split(/;\s*$/m).map((s) => s.trim()).filter((s) => s !== '')
}

const rowsOf = async <T>(client: ClickHouseClient, query: string, query_params: Record<string, unknown> = {}) => (await client.query({ query, query_params, format: 'JSONEachRow' })).json<T>()

/** What a database holds, as the engine reports it: every column with its type, every table's engine, keys, settings and view query. */
async function schemaOf(client: ClickHouseClient): Promise<unknown> {
  const columns = await rowsOf(client, 'SELECT table, name, type, position FROM system.columns WHERE database = currentDatabase() ORDER BY table, position')
  const tables = await rowsOf<{ name: string; engine_full: string; create_table_query: string }>(client, 'SELECT name, engine, sorting_key, partition_key, primary_key, engine_full, create_table_query FROM system.tables WHERE database = currentDatabase() ORDER BY name')
  // The CREATE text names the database, which differs; nothing else in it may.
  const db = (await rowsOf<{ d: string }>(client, 'SELECT currentDatabase() AS d'))[0]!.d
  const indices = await rowsOf(client, 'SELECT table, name, type_full, expr, granularity FROM system.data_skipping_indices WHERE database = currentDatabase() ORDER BY table, name')
  return { columns, tables: tables.map((r) => ({ ...r, create_table_query: r.create_table_query.replaceAll(`${db}.`, '') })), indices }
}

const deployUrl = await standInDatabaseUrl('deploy-schema')
const migratedUrl = await standInDatabaseUrl('migrated')
const deployed = createClient({ url: deployUrl })
const migrated = createClient({ url: migratedUrl })
t.teardown(async () => {
  await deployed.close()
  await migrated.close()
})

t.test('schema.sql runs, and holds what the migrations create', async (t) => {
  for (const statement of await statementsOf('deploy/clickhouse/schema.sql')) await deployed.command({ query: statement })
  const store = new ClickHouseReceiptStore({ target: { kind: 'server', url: migratedUrl, requestTimeoutMs: 60_000 } })
  await store.open()
  await store.close()
  t.same(await schemaOf(deployed), await schemaOf(migrated), 'the same tables, columns, types, engines, keys, settings and view')
})

t.test('on a schema from schema.sql the service finds the newest version and changes nothing', async (t) => {
  const versions = await rowsOf<{ v: number }>(deployed, 'SELECT max(version) AS v FROM schema_migrations')
  t.equal(Number(versions[0]?.v), MIGRATIONS.length, 'schema.sql is at the newest migration: a new migration goes into it too')
  const before = await schemaOf(deployed)
  const store = new ClickHouseReceiptStore({ target: { kind: 'server', url: deployUrl, requestTimeoutMs: 60_000 } })
  await store.open()
  await store.close()
  const rows = await rowsOf<{ n: number | string }>(deployed, 'SELECT count() AS n FROM schema_migrations')
  t.equal(Number(rows[0]?.n), MIGRATIONS.length, 'no version recorded again')
  t.same(await schemaOf(deployed), before)
  // Safe to apply again.
  for (const statement of await statementsOf('deploy/clickhouse/schema.sql')) await deployed.command({ query: statement })
  t.same(await schemaOf(deployed), before)
})

t.test('schema-replicated.sql parses, and is schema.sql ON CLUSTER with replicated engines', async (t) => {
  const single = await statementsOf('deploy/clickhouse/schema.sql')
  const replicated = await statementsOf('deploy/clickhouse/schema-replicated.sql')
  t.equal(replicated.length, single.length)
  const formatted = async (q: string) => (await rowsOf<{ f: string }>(deployed, 'SELECT formatQuery({q:String}) AS f', { q }))[0]!.f
  for (const [i, statement] of replicated.entries()) {
    if (/^CREATE /.test(statement)) t.match(statement, /ON CLUSTER '\{cluster\}'/, `statement ${i + 1} runs on every node`)
    if (/MergeTree/.test(statement)) t.match(statement, /Replicated\w*MergeTree\('\/clickhouse\/tables\/\{shard\}\/\{database\}\/\w+', '\{replica\}'\)/, `statement ${i + 1} is replicated`)
    const plain = statement.replace(/ ON CLUSTER '\{cluster\}'/, '').replace(/Replicated(\w*MergeTree)\('[^']*', '\{replica\}'\)/, '$1')
    t.equal(await formatted(plain), await formatted(single[i]!), `statement ${i + 1} is schema.sql's but for the cluster`)
  }
})
