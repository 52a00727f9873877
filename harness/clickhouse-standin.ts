/**
 * A STAND-IN FOR A CLICKHOUSE SERVER, not ClickHouse: no ClickHouse server can be
 * installed on the machines this project is built and tested on, so the receipt store's
 * server path (CLICKHOUSE_URL) is tested against this. It is a small node:http server
 * that speaks the part of ClickHouse's HTTP interface `@clickhouse/client` uses, and has
 * every statement answered by chDB (the ClickHouse engine as a library) on a folder of
 * its own: the real engine answers the real client over real HTTP.
 *
 * What it speaks, as ClickHouse's HTTP interface does:
 * - `GET /ping` answers `Ok.`; any request to `/` runs a statement.
 * - The statement in the `query` URL parameter or in the body; with both, the body
 *   follows the URL's statement (an INSERT's rows).
 * - `param_<name>` URL parameters bind `{name:Type}` placeholders, parsed by the engine
 *   from the same text as a server parses them (they are SET as `param_<name>`).
 * - Any other URL parameter is a setting of that statement (`SET name = 'value'`);
 *   `database`, `default_format`, `query_id`, `session_id`, `session_timeout`,
 *   `session_check`, user and password keys and the HTTP-only settings are not settings.
 * - `query_id`: answered in `X-ClickHouse-Query-Id`; one still running refuses a second
 *   statement with its id (QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING, 216).
 * - `session_id`: statements of one session share one engine session (its SET and
 *   temporary tables) until `session_timeout` seconds (60) without a statement; a session
 *   running a statement refuses a second one (SESSION_IS_LOCKED, 373); `session_check=1`
 *   on an unknown session is SESSION_NOT_FOUND (372).
 * - Compression: a request body in `Content-Encoding` gzip, deflate or br is decoded; with
 *   `enable_http_compression=1` the answer is compressed in the first of gzip, deflate or
 *   br that `Accept-Encoding` names, with `Content-Encoding` set.
 * - Output: a SELECT in a row format (JSONEachRow, CSV, TabSeparated, ...) is streamed
 *   block by block with backpressure; Parquet is written by the engine to a file, whole,
 *   then streamed from it (the engine's streaming cursor makes each block a Parquet file
 *   of its own, which concatenated are not one). Other statements answer when done.
 * - Errors as ClickHouse reports them: the HTTP status ClickHouse gives the code (400,
 *   403, 404, 408, 500, ...), `X-ClickHouse-Exception-Code`, and the body
 *   `Code: N. DB::Exception: ... (NAME)`, so the client raises its ClickHouseError with
 *   that code. An error after the first bytes of an answer went out cuts the connection.
 * - `X-ClickHouse-Summary` (rows read and written), `X-ClickHouse-Format`,
 *   `X-ClickHouse-Timezone`, and `Keep-Alive: timeout=10` as ClickHouse sends it.
 * - With `user` and `password` given, HTTP basic authentication or the
 *   `X-ClickHouse-User`/`X-ClickHouse-Key` headers are checked (AUTHENTICATION_FAILED,
 *   516, HTTP 403).
 *
 * Where it differs from a server: one engine in this process (libchdb binds one data
 * folder per process), so the test process that starts it cannot open another chDB
 * folder; statements with parameters run one at a time (chDB serialises them); URL
 * settings given to a statement of a session stay set in that session; multipart
 * parameters (`use_multipart_params`) are refused as NOT_IMPLEMENTED (48); GET does not
 * force read-only. Nothing of the ClickHouse server's configuration, users, quotas or
 * replication is here.
 */
import { randomUUID } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdir, rm } from 'node:fs/promises'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { join, resolve } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { Readable, type Transform } from 'node:stream'
import zlib from 'node:zlib'

const require = createRequire(import.meta.url)
type ChdbSession = import('chdb').Session

export interface ClickHouseStandInOptions {
  /** The engine's data folder (created if missing). */
  readonly path: string
  /** Checked when given, with `password`. */
  readonly user?: string
  readonly password?: string
  /** Answered in `X-ClickHouse-Server-Display-Name`. */
  readonly displayName?: string
}

export interface ClickHouseStandIn {
  /** http://127.0.0.1:<port>, with the credentials when they are checked. */
  readonly url: string
  readonly path: string
  /** Statements run (pings not counted). */
  statements(): number
  close(): Promise<void>
}

/** URL parameters that are not settings of the statement. */
const NOT_SETTINGS = new Set([
  'query', 'query_id', 'session_id', 'session_timeout', 'session_check', 'database', 'default_format', 'user', 'password', 'quota_key', 'role',
  'compress', 'decompress', 'buffer_size', 'wait_end_of_query', 'enable_http_compression', 'http_zlib_compression_level', 'http_response_compression_method',
  'send_progress_in_http_headers', 'http_headers_progress_interval_ms', 'http_send_progress_interval_ms', 'http_response_buffer_size', 'cancel_http_readonly_queries_on_client_close',
])

/** The HTTP status ClickHouse answers an exception code with (ClickHouse's exceptionCodeToHTTPStatus); 500 otherwise. */
const STATUS_OF_CODE = new Map<number, number>([
  ...[194].map((c) => [c, 401] as const), // REQUIRED_PASSWORD
  ...[192, 193, 497, 516].map((c) => [c, 403] as const), // UNKNOWN_USER, WRONG_PASSWORD, ACCESS_DENIED, AUTHENTICATION_FAILED
  // BAD_ARGUMENTS, CANNOT_PARSE_*, DUPLICATE_COLUMN, ILLEGAL_COLUMN, THERE_IS_NO_COLUMN, SYNTAX_ERROR, INCORRECT_DATA, TYPE_MISMATCH
  ...[36, 6, 25, 26, 38, 41, 72, 15, 44, 8, 62, 117, 53].map((c) => [c, 400] as const),
  // UNKNOWN_TABLE, UNKNOWN_FUNCTION, UNKNOWN_IDENTIFIER, UNKNOWN_TYPE, UNKNOWN_STORAGE, UNKNOWN_DATABASE, UNKNOWN_SETTING, UNKNOWN_AGGREGATE_FUNCTION, UNKNOWN_FORMAT, UNKNOWN_TYPE_OF_QUERY
  ...[60, 46, 47, 50, 56, 81, 115, 63, 73, 78].map((c) => [c, 404] as const),
  [48, 501], // NOT_IMPLEMENTED
  [209, 503], // SOCKET_TIMEOUT
  [159, 408], // TIMEOUT_EXCEEDED
])

class StandInError extends Error {
  constructor(readonly code: number, readonly codeName: string, message: string) {
    super(`Code: ${code}. DB::Exception: ${message}. (${codeName})`)
  }
}

/** The ClickHouse code and text of whatever chDB or this server threw. */
function exceptionOf(err: unknown): { code: number; text: string } {
  if (err instanceof StandInError) return { code: err.code, text: err.message }
  const message = err instanceof Error ? err.message : String(err)
  const found = /Code: (\d+)\. DB::Exception:/.exec(message)
  if (found === null) return { code: 1001, text: `Code: 1001. DB::Exception: ${message}. (STD_EXCEPTION)` }
  return { code: Number(found[1]), text: message.slice(found.index) }
}

/** A SQL string literal holding `value` exactly. */
const literal = (value: string): string => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`

function decoderOf(encoding: string | undefined): Transform | undefined {
  switch ((encoding ?? '').trim().toLowerCase()) {
    case '':
    case 'identity':
      return undefined
    case 'gzip':
      return zlib.createGunzip()
    case 'deflate':
      return zlib.createInflate()
    case 'br':
      return zlib.createBrotliDecompress()
    default:
      throw new StandInError(36, 'BAD_ARGUMENTS', `Unknown Content-Encoding ${encoding}`)
  }
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const decoder = decoderOf(req.headers['content-encoding'])
  const source: AsyncIterable<Buffer> = decoder === undefined ? req : req.pipe(decoder)
  const chunks: Buffer[] = []
  for await (const chunk of source) chunks.push(chunk)
  return Buffer.concat(chunks).toString('utf8')
}

function encoderFor(req: IncomingMessage, compress: boolean): { name: string; make: () => Transform } | undefined {
  if (!compress) return undefined
  const accepted = String(req.headers['accept-encoding'] ?? '').toLowerCase().split(',').map((s) => s.trim().split(';')[0])
  if (accepted.includes('gzip')) return { name: 'gzip', make: () => zlib.createGzip() }
  if (accepted.includes('deflate')) return { name: 'deflate', make: () => zlib.createDeflate() }
  if (accepted.includes('br')) return { name: 'br', make: () => zlib.createBrotliCompress() }
  return undefined
}

/** The statement's output format: its own trailing FORMAT clause, else `default_format`, else TabSeparated. */
function outputFormat(sql: string, defaultFormat: string | null): string {
  return /\bFORMAT\s+(\w+)\s*;?\s*$/i.exec(sql)?.[1] ?? defaultFormat ?? 'TabSeparated'
}

const isSelect = (sql: string): boolean => /^\s*(\(\s*)*(SELECT|WITH)\b/i.test(sql.replace(/^(\s*(--[^\n]*\n|\/\*[\s\S]*?\*\/))*/, ''))

interface Session {
  readonly engine: ChdbSession
  busy: boolean
  timer: NodeJS.Timeout | undefined
}

export async function startClickHouseStandIn(options: ClickHouseStandInOptions): Promise<ClickHouseStandIn> {
  const { Session: ChdbSessionClass, version } = require('chdb') as typeof import('chdb') & { version?: () => { libchdb?: string } }
  const path = resolve(options.path)
  await mkdir(path, { recursive: true })
  const exportsDir = `${path}-standin-files`
  await mkdir(exportsDir, { recursive: true })
  // The first session binds the folder and stays open: the engine lives as long as the server.
  const anchor = new ChdbSessionClass(path)
  const engineVersion = (() => {
    try {
      return version?.().libchdb ?? 'chdb'
    } catch {
      return 'chdb'
    }
  })()
  const sessions = new Map<string, Session>()
  const running = new Set<string>()
  let statements = 0

  function fail(res: ServerResponse, queryId: string, err: unknown): void {
    const { code, text } = exceptionOf(err)
    if (res.headersSent) {
      // ClickHouse writes the exception into a body already under way; the client can only see the cut.
      res.destroy(new Error(text))
      return
    }
    const body = `${text} (version ${engineVersion})\n`
    res.writeHead(STATUS_OF_CODE.get(code) ?? 500, {
      'Content-Type': 'text/plain; charset=UTF-8',
      'X-ClickHouse-Exception-Code': String(code),
      'X-ClickHouse-Query-Id': queryId,
      'X-ClickHouse-Server-Display-Name': options.displayName ?? 'clickhouse-standin',
      'Content-Length': Buffer.byteLength(body),
    })
    res.end(body)
  }

  function authorised(req: IncomingMessage, url: URL): boolean {
    if (options.password === undefined) return true
    const basic = /^Basic (.+)$/i.exec(String(req.headers.authorization ?? ''))
    const [user, password] = basic
      ? Buffer.from(basic[1]!, 'base64').toString('utf8').split(/:(.*)/s)
      : [String(req.headers['x-clickhouse-user'] ?? url.searchParams.get('user') ?? 'default'), String(req.headers['x-clickhouse-key'] ?? url.searchParams.get('password') ?? '')]
    return user === (options.user ?? 'default') && password === options.password
  }

  function sessionFor(url: URL): { session: Session; done: () => void } {
    const id = url.searchParams.get('session_id')
    if (id === null || id === '') {
      const session: Session = { engine: new ChdbSessionClass(path), busy: true, timer: undefined }
      return { session, done: () => session.engine.close() }
    }
    let session = sessions.get(id)
    if (session === undefined) {
      if (url.searchParams.get('session_check') === '1') throw new StandInError(372, 'SESSION_NOT_FOUND', `Session ${id} not found`)
      session = { engine: new ChdbSessionClass(path), busy: false, timer: undefined }
      sessions.set(id, session)
    }
    if (session.busy) throw new StandInError(373, 'SESSION_IS_LOCKED', `Session ${id} is locked by a concurrent client`)
    session.busy = true
    clearTimeout(session.timer)
    const timeoutS = Number(url.searchParams.get('session_timeout') ?? 60)
    const s = session
    return {
      session,
      done: () => {
        s.busy = false
        s.timer = setTimeout(() => {
          sessions.delete(id)
          s.engine.close()
        }, Math.max(1, timeoutS) * 1000)
        s.timer.unref()
      },
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://standin')
    if (url.pathname === '/ping' || (url.pathname === '/' && req.method === 'GET' && !url.searchParams.has('query'))) {
      req.resume()
      res.writeHead(200, { 'Content-Type': 'text/html; charset=UTF-8', 'Keep-Alive': 'timeout=10' })
      res.end('Ok.\n')
      return
    }
    const queryId = url.searchParams.get('query_id') || randomUUID()
    if (url.pathname !== '/') throw new StandInError(36, 'BAD_ARGUMENTS', `There is no handler ${url.pathname}`)
    if (!authorised(req, url)) throw new StandInError(516, 'AUTHENTICATION_FAILED', 'default: Authentication failed: password is incorrect, or there is no user with such name')
    if (String(req.headers['content-type'] ?? '').startsWith('multipart/')) throw new StandInError(48, 'NOT_IMPLEMENTED', 'the stand-in does not read multipart parameters')
    const body = await bodyOf(req)
    const urlQuery = url.searchParams.get('query') ?? ''
    const sql = urlQuery === '' ? body : body === '' ? urlQuery : `${urlQuery}\n${body}`
    if (sql.trim() === '') throw new StandInError(62, 'SYNTAX_ERROR', 'Empty query')
    if (running.has(queryId)) throw new StandInError(216, 'QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING', `Query with id = ${queryId} is already running`)
    const prelude: string[] = []
    const database = url.searchParams.get('database')
    if (database !== null && database !== '') prelude.push(`USE ${database.replace(/[^\w]/g, '')}`)
    // A server parses a parameter's value as its type, never as SQL: max_query_size does not
    // bound it (the URL's length does, http_max_uri_size, 1 MiB). Here it travels in a SET
    // statement, so the bound is lifted for those and put back before the statement runs.
    const params = [...url.searchParams].filter(([key]) => key.startsWith('param_'))
    if (params.length > 0) {
      prelude.push(`SET max_query_size = ${1 << 21}`, ...params.map(([key, value]) => `SET ${key} = ${literal(value)}`), `SET max_query_size = DEFAULT`)
    }
    for (const [key, value] of url.searchParams) {
      if (key.startsWith('param_')) continue
      if (!NOT_SETTINGS.has(key)) {
        if (!/^[A-Za-z_]\w*$/.test(key)) throw new StandInError(115, 'UNKNOWN_SETTING', `Unknown setting ${key}`)
        prelude.push(`SET ${key} = ${literal(value)}`)
      }
    }
    const format = outputFormat(sql, url.searchParams.get('default_format'))
    const encoder = encoderFor(req, url.searchParams.get('enable_http_compression') === '1')
    const headers: Record<string, string> = {
      'X-ClickHouse-Query-Id': queryId,
      'X-ClickHouse-Format': format,
      'X-ClickHouse-Timezone': 'UTC',
      'X-ClickHouse-Server-Display-Name': options.displayName ?? 'clickhouse-standin',
      'Keep-Alive': 'timeout=10',
      ...(encoder && { 'Content-Encoding': encoder.name }),
    }
    const { session, done } = sessionFor(url)
    running.add(queryId)
    statements++
    const abort = new AbortController()
    res.on('close', () => abort.abort())
    try {
      for (const statement of prelude) await session.engine.queryAsync(statement)
      const out = encoder?.make()
      const send = async (chunks: AsyncIterable<Uint8Array>, summary: Record<string, string>) => {
        res.writeHead(200, { ...headers, 'X-ClickHouse-Summary': JSON.stringify(summary) })
        if (out === undefined) await pipeline(Readable.from(chunks), res)
        else await pipeline(Readable.from(chunks), out, res)
      }
      if (isSelect(sql) && /^parquet$/i.test(format)) {
        // The engine writes the file whole; it is then streamed from disk with backpressure.
        const file = join(exportsDir, `${randomUUID()}.parquet`)
        try {
          const select = sql.replace(/\bFORMAT\s+\w+\s*;?\s*$/i, '')
          await session.engine.queryAsync(`INSERT INTO FUNCTION file(${literal(file)}, 'Parquet') ${select}`, { signal: abort.signal })
          await send(createReadStream(file, { highWaterMark: 1 << 16 }), summaryOf(0, 0))
        } finally {
          await rm(file, { force: true })
        }
      } else if (isSelect(sql)) {
        const cursor = session.engine.queryStream(sql.replace(/\bFORMAT\s+\w+\s*;?\s*$/i, ''), { format, signal: abort.signal })
        const iterator = cursor[Symbol.asyncIterator]()
        // The first block before the headers: an error in planning is answered as an error.
        const first = await iterator.next()
        await send(
          (async function* () {
            try {
              if (!first.done) yield first.value.raw()
              for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value.raw()
            } finally {
              await iterator.return?.()
            }
          })(),
          summaryOf(0, 0),
        )
      } else {
        const result = await session.engine.queryAsync(sql, { format })
        const bytes = Buffer.from(result.bytes())
        const written = /^\s*INSERT\b/i.test(sql) ? Number(result.rowsRead ?? 0) : 0
        await send((async function* () { if (bytes.length > 0) yield bytes })(), summaryOf(written === 0 ? Number(result.rowsRead ?? 0) : 0, written))
      }
    } finally {
      running.delete(queryId)
      done()
    }
  }

  const server = createServer({ maxHeaderSize: 1 << 20, keepAliveTimeout: 10_000 }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      req.resume()
      fail(res, String(new URL(req.url ?? '/', 'http://standin').searchParams.get('query_id') ?? ''), err)
    })
  })
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
  const port = (server.address() as AddressInfo).port
  const auth = options.password === undefined ? '' : `${encodeURIComponent(options.user ?? 'default')}:${encodeURIComponent(options.password)}@`
  let closed = false
  return {
    url: `http://${auth}127.0.0.1:${port}`,
    path,
    statements: () => statements,
    async close() {
      if (closed) return
      closed = true
      server.closeAllConnections()
      await new Promise((ok) => server.close(ok))
      for (const s of sessions.values()) {
        clearTimeout(s.timer)
        s.engine.close()
      }
      sessions.clear()
      anchor.close()
      await rm(exportsDir, { recursive: true, force: true })
    },
  }
}

function summaryOf(read: number, written: number): Record<string, string> {
  return { read_rows: String(read), read_bytes: '0', written_rows: String(written), written_bytes: '0', total_rows_to_read: '0', result_rows: '0', result_bytes: '0', elapsed_ns: '0' }
}
