import { ClickHouseError, parseError } from '@clickhouse/client'
import { ReceiptStoreError } from './receipt-store-error.js'

/**
 * ClickHouse error codes (src/Common/ErrorCodes.cpp) that say "not now" rather than
 * "never": overload, timeouts, memory pressure, too many parts, a read-only replica,
 * network trouble between servers, an insert whose fate is unknown.
 */
const TRANSIENT_CODES = new Set([
  3, // UNEXPECTED_END_OF_FILE: a connection cut mid-answer
  159, // TIMEOUT_EXCEEDED
  160, // TOO_SLOW
  164, // READONLY
  201, // QUOTA_EXCEEDED
  202, // TOO_MANY_SIMULTANEOUS_QUERIES
  203, // NO_FREE_CONNECTION
  209, // SOCKET_TIMEOUT
  210, // NETWORK_ERROR
  236, // ABORTED
  241, // MEMORY_LIMIT_EXCEEDED
  242, // TABLE_IS_READ_ONLY
  252, // TOO_MANY_PARTS
  279, // ALL_CONNECTION_TRIES_FAILED
  285, // TOO_FEW_LIVE_REPLICAS
  319, // UNKNOWN_STATUS_OF_INSERT
  394, // QUERY_WAS_CANCELLED
  425, // SYSTEM_ERROR
  473, // DEADLOCK_AVOIDED
  999, // KEEPER_EXCEPTION
])

/**
 * The ClickHouse code of an error reported by the engine or server. Over HTTP the client
 * throws its ClickHouseError; chDB's connection throws the one of @clickhouse/client-common,
 * an equal class the client bundles a copy of, so `instanceof` alone misses it. chDB's
 * streaming reads throw a ChdbError (code `CHDB_*`) whose message is the engine's own
 * `Code: N. DB::Exception: ...`, which the client's parser for that format reads.
 */
function clickHouseCode(err: unknown): number | undefined {
  if (!(err instanceof Error)) return undefined
  const code = (err as { code?: unknown }).code
  if (err instanceof ClickHouseError || (err.constructor.name === 'ClickHouseError' && typeof code === 'string')) {
    return /^\d+$/.test(String(code)) ? Number(code) : undefined
  }
  if (typeof code === 'string' && code.startsWith('CHDB_')) {
    const parsed = parseError(err.message)
    if (parsed instanceof ClickHouseError && /^\d+$/.test(parsed.code)) return Number(parsed.code)
  }
  return undefined
}

/**
 * Turns whatever the client or chDB threw into a ReceiptStoreError, here at the adapter
 * edge, so nothing above matches on message text. An error ClickHouse reported carries
 * its numeric code: a known transient one is `unavailable`, any other `store_failed`.
 * An error without one never reached ClickHouse's answer (connection refused or reset,
 * a client-side timeout, a proxy's 5xx): `unavailable`.
 */
export function toStoreError(what: string, err: unknown): ReceiptStoreError {
  if (err instanceof ReceiptStoreError) return err
  const code = clickHouseCode(err)
  if (code === undefined) return new ReceiptStoreError('unavailable', `receipt store: ${what}: ClickHouse did not answer`, { cause: err })
  if (TRANSIENT_CODES.has(code)) return new ReceiptStoreError('unavailable', `receipt store: ${what}: ClickHouse is busy or failing (code ${code})`, { cause: err })
  return new ReceiptStoreError('store_failed', `receipt store: ${what}: ClickHouse refused it (code ${code})`, { cause: err })
}
