import { randomUUID } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdir, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { Readable } from 'node:stream'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import { ReceiptStoreError } from './receipt-store-error.js'

const require = createRequire(import.meta.url)

/** Where receipts live: the embedded engine on a folder of this machine, or a ClickHouse server. */
export type ClickHouseTarget =
  | {
      readonly kind: 'chdb'
      /** DATA_DIR/clickhouse. */
      readonly path: string
      /** The engine's memory ceiling (max_server_memory_usage): a query past it fails, the process lives. */
      readonly maxServerMemoryBytes: number
    }
  | {
      readonly kind: 'server'
      /** CLICKHOUSE_URL: http(s)://user:password@host:8123/database. */
      readonly url: string
      /** Per-request timeout. */
      readonly requestTimeoutMs: number
    }

/** The output formats the store streams, by ClickHouse's names. */
export type RawFormat = 'JSONEachRow' | 'CSV' | 'Parquet'

/**
 * One way to ClickHouse: the @clickhouse/client instance every statement goes through,
 * plus the streamed read the export needs. chDB's connection materialises a whole result
 * before the client sees it (its `query` and `exec` buffer), so on chDB the stream comes
 * from chDB's own cursor (Session.queryStreamBind), the same SQL and parameters, fetched a
 * block at a time only when the consumer asks for the next chunk.
 */
export interface ClickHouseConnection {
  readonly engine: 'chdb' | 'server'
  readonly client: ClickHouseClient
  /** The bytes of `query` (no FORMAT clause) in `format`, pulled chunk by chunk; abort or return stops the query. */
  stream(query: string, params: Record<string, unknown>, format: RawFormat, signal?: AbortSignal): AsyncIterable<Uint8Array>
  /**
   * Inserts rows already written as JSONCompactEachRow (one JSON array per line, values in
   * the order of `columns`): the bytes go to the engine as they are, with no object per row
   * for the client to serialise (on chDB: the engine's raw insert, handed the buffer itself).
   */
  insertCompact(table: string, columns: readonly string[], body: Buffer): Promise<void>
  close(): Promise<void>
}

/** Settings for every statement on both engines. */
const COMMON_SETTINGS = {
  // Parameters never enter the SQL text; a statement is rejected rather than truncated.
  date_time_output_format: 'iso',
  output_format_json_quote_64bit_integers: 0,
} as const

/**
 * Per-format output settings. Parquet: snappy, which every Parquet reader decodes without
 * extras (ClickHouse's default, lz4, is not in every reader's default set).
 * NDJSON and CSV: blocks of 4,096 rows (ClickHouse's default is 65,409): each block is one
 * chunk in this process's memory (about 2 MB of NDJSON instead of 30), and the merge of
 * FINAL in sort order holds a block per part. Measured on an export of 500,000 receipts:
 * peak RSS 620 MB at the default, 383 MB at 4,096, with no loss of rows per second.
 */
const STREAM_BLOCK_ROWS = '4096'
const FORMAT_SETTINGS: Record<RawFormat, Record<string, string>> = {
  JSONEachRow: { max_block_size: STREAM_BLOCK_ROWS },
  // NULL as an empty field rather than ClickHouse's `\N`, which CSV readers take for text;
  // text is always quoted, so an empty string is `""` and the two stay apart.
  CSV: { max_block_size: STREAM_BLOCK_ROWS, format_csv_null_representation: '' },
  // Row groups of 100,000 rows (ClickHouse's default is 1,000,000): the writer holds one
  // row group's columns at a time.
  Parquet: { output_format_parquet_compression_method: 'snappy', output_format_parquet_row_group_size: '100000' },
}

/** The engine-wide settings chDB is started with (they cannot be SET later). */
function chdbEngineArgs(maxServerMemoryBytes: number): string[] {
  return [
    `--max_server_memory_usage=${maxServerMemoryBytes}`,
    // The default mark cache is 5 GiB; the receipts' primary keys need a few MB.
    '--mark_cache_size=67108864',
    '--index_mark_cache_size=16777216',
    // Load the tables before the first query instead of in the background.
    '--async_load_databases=0',
  ]
}

type ChdbSession = import('chdb').Session

/**
 * libchdb binds one data folder per process, so the engine is shared: every store opened
 * on the same folder joins it, and a second folder while one is open is refused. The first
 * session started the engine with its arguments; it stays open until the last user closes.
 */
let engine: { path: string; anchor: ChdbSession; users: number } | undefined

function joinEngine(path: string, maxServerMemoryBytes: number): ChdbSession {
  const { Session } = require('chdb') as typeof import('chdb')
  if (engine === undefined) {
    engine = { path, anchor: new Session(path, { connectionArgs: chdbEngineArgs(maxServerMemoryBytes) }), users: 0 }
  } else if (engine.path !== path) {
    throw new ReceiptStoreError('invalid_argument', `receipt store: the embedded ClickHouse already serves ${engine.path}; one data folder per process (asked for ${path})`)
  }
  engine.users++
  return engine.anchor
}

function leaveEngine(): void {
  if (engine === undefined) return
  if (--engine.users > 0) return
  engine.anchor.close()
  engine = undefined
}

async function openChdb(target: Extract<ClickHouseTarget, { kind: 'chdb' }>): Promise<ClickHouseConnection> {
  const path = resolve(target.path)
  await mkdir(path, { recursive: true })
  joinEngine(path, target.maxServerMemoryBytes)
  const { Session } = require('chdb') as typeof import('chdb')
  const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
  // chdb types its connection against @clickhouse/client-common, the client against the copy of those types it bundles.
  const client = createClient({ connection: createChdbConnection({ path }) as never, clickhouse_settings: COMMON_SETTINGS })
  // The raw insert: the client's insert path on chDB serialises each row and splices the
  // whole body into the statement's text, which the engine's SQL parser then reads.
  const inserts = new Session(path)
  let closed = false
  return {
    engine: 'chdb',
    client,
    async insertCompact(table, columns, body) {
      await inserts.insert({ table, values: body, format: 'JSONCompactEachRow', columns })
    },
    async *stream(query, params, format, signal) {
      if (format === 'Parquet') {
        yield* parquetThroughFile(path, query, params, signal)
        return
      }
      // One streaming cursor per chDB session: each export gets a session of its own on the shared engine.
      const session = new Session(path)
      try {
        // Constant settings of this module, never a caller's value.
        const settings = Object.entries({ ...COMMON_SETTINGS, ...FORMAT_SETTINGS[format] }).map(([k, v]) => `${k} = '${v}'`).join(', ')
        const cursor = session.queryStreamBind(`${query} SETTINGS ${settings}`, params, { format, ...(signal ? { signal } : {}) })
        for await (const chunk of cursor) yield chunk.raw()
      } finally {
        session.close()
      }
    },
    async close() {
      if (closed) return
      closed = true
      await client.close()
      inserts.close()
      leaveEngine()
    },
  }
}

/**
 * chDB's streaming cursor formats each block on its own: in Parquet every chunk is a whole
 * file, and their concatenation is not one. So on chDB a Parquet export has the engine
 * write one file (INSERT INTO FUNCTION file(), which writes row group by row group with
 * bounded memory) into a folder beside the data folder, then streams that file from disk
 * with backpressure and deletes it. The cost: the file's size on disk while it goes out,
 * and a first byte only once the engine has written it all; an abort stops the sending
 * at once but not the engine's writing (chDB cannot interrupt a statement), whose file is
 * deleted when it ends.
 */
async function* parquetThroughFile(path: string, query: string, params: Record<string, unknown>, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
  const dir = `${path}-exports`
  await mkdir(dir, { recursive: true })
  const file = join(dir, `${randomUUID()}.parquet`)
  const { Session } = require('chdb') as typeof import('chdb')
  const session = new Session(path)
  try {
    const settings = Object.entries({ ...COMMON_SETTINGS, ...FORMAT_SETTINGS.Parquet }).map(([k, v]) => `${k} = '${v}'`).join(', ')
    // The file name is ours, never a caller's; it is bound as a parameter all the same.
    await session.queryBindAsync(`INSERT INTO FUNCTION file({export_file:String}, 'Parquet') ${query} SETTINGS ${settings}`, { ...params, export_file: file }, signal ? { signal } : {})
    const body = createReadStream(file, { highWaterMark: 1 << 20, ...(signal ? { signal } : {}) })
    for await (const chunk of body) yield chunk as Buffer
  } finally {
    session.close()
    await rm(file, { force: true })
  }
}

function openServer(target: Extract<ClickHouseTarget, { kind: 'server' }>): ClickHouseConnection {
  const client = createClient({
    url: target.url,
    request_timeout: target.requestTimeoutMs,
    clickhouse_settings: COMMON_SETTINGS,
    // Statements are retried by the store's callers (the recorder backs off); never twice here.
    keep_alive: { enabled: true },
  })
  return {
    engine: 'server',
    client,
    async insertCompact(table, columns, body) {
      // The client's insert takes a JSON format only as objects (an object-mode stream) and
      // serialises them again; the INSERT statement run with the bytes as its body sends the
      // rows as they are (the statement goes in the URL, the rows in the body).
      const result = await client.exec({
        query: `INSERT INTO ${table} (${columns.join(', ')}) FORMAT JSONCompactEachRow`,
        values: Readable.from([body], { objectMode: false }),
      })
      // The answer's body is empty once the insert is confirmed; read to its end to free the connection.
      for await (const _ of result.stream) void _
    },
    async *stream(query, params, format, signal) {
      // The client never sends a request whose signal was aborted before it was made, but
      // it does not check: it only listens for an abort to come.
      signal?.throwIfAborted()
      const result = await client.exec({
        query: `${query} FORMAT ${format}`,
        query_params: params,
        ...(signal ? { abort_signal: signal } : {}),
        // A read-only query keeps running after its HTTP client left unless told otherwise.
        clickhouse_settings: { cancel_http_readonly_queries_on_client_close: 1, ...FORMAT_SETTINGS[format] },
      })
      const body: Readable = result.stream
      // The client stops listening to the signal once the answer's headers are in: from then
      // on an abort ends the body here (which closes the connection, and the server cancels
      // the query), and the export ends with the abort's reason.
      const stop = () => body.destroy(signal?.reason as Error)
      signal?.addEventListener('abort', stop, { once: true })
      try {
        for await (const chunk of body) {
          signal?.throwIfAborted()
          yield chunk as Uint8Array
        }
      } finally {
        signal?.removeEventListener('abort', stop)
        body.destroy()
      }
    },
    close: () => client.close(),
  }
}

export async function openClickHouse(target: ClickHouseTarget): Promise<ClickHouseConnection> {
  return target.kind === 'chdb' ? openChdb(target) : openServer(target)
}
