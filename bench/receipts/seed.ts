import type { ClickHouseClient } from '@clickhouse/client'

/** The first seeded receipt's emitted_at; receipt n is emitted `n * SPACING_MS` later. */
export const SEED_BASE_MS = 1_750_000_000_000
export const SEED_SPACING_MS = 997
const CHUNK = 1_000_000

export interface SeedShape {
  readonly rows: number
  readonly sources: number
}

/** The seeded source of receipt n, its signal_id, and its token (5,000 distinct tokens). */
export const seededSource = (n: number, sources: number) => `src-${n % sources}`
export const seededSignal = (n: number) => `sig-${n}`
export const seededToken = (k: number) => `0x${(k % 5000).toString(16).toUpperCase().padStart(40, '0')}`

/**
 * Seeds receipts the way the recorder writes them, by ClickHouse itself (INSERT ... SELECT
 * FROM numbers(), a million rows per statement): receipt n belongs to source n % sources,
 * is emitted SPACING_MS after receipt n - 1 (10M receipts span about 115 days, five monthly
 * partitions), has severity low/high/critical in turn, one of 5,000 tokens, one of 97
 * agents per source group. Its id is the store's (the first 16 bytes of
 * SHA-256("receipt\0source\0signal") in hex). Then a tenth are scored (hit, miss or void)
 * and one in a hundred disputed, as rows of their own, as the scorer and disputes write them.
 * Returns the seconds each step took.
 */
export async function seedReceipts(client: ClickHouseClient, shape: SeedShape, progress: (line: string) => void): Promise<{ receiptsS: number; scoringS: number; disputesS: number }> {
  let t = performance.now()
  for (let offset = 0; offset < shape.rows; offset += CHUNK) {
    await client.command({
      query: `INSERT INTO receipts (source_id, test, emitted_at, receipt_id, agent_id, signal_id, key_id, token, severity, confidence, note, received_at, recorded_at)
        SELECT concat('src-', toString(number % ${shape.sources})) AS source_id, false,
          fromUnixTimestamp64Milli(toInt64(${SEED_BASE_MS} + number * ${SEED_SPACING_MS}), 'UTC') AS emitted_at,
          concat('rc_', lower(hex(substring(SHA256(concat('receipt', char(0), source_id, char(0), signal_id)), 1, 16)))),
          concat('agent-', toString(number % ${shape.sources} % 97)), concat('sig-', toString(number)) AS signal_id, 'key-1',
          concat('0x', leftPad(hex(number % 5000), 40, '0')), ['low', 'high', 'critical'][number % 3 + 1], number % 101, 'a note',
          emitted_at + toIntervalMillisecond(250), emitted_at + toIntervalMillisecond(400)
        FROM numbers(${offset}, ${Math.min(CHUNK, shape.rows - offset)})`,
    })
    progress(`  seeded ${Math.min(offset + CHUNK, shape.rows).toLocaleString()} receipts (${((performance.now() - t) / 1000).toFixed(1)} s)`)
  }
  const receiptsS = (performance.now() - t) / 1000
  t = performance.now()
  await client.command({
    query: `INSERT INTO receipts (source_id, test, emitted_at, receipt_id, scoring)
      SELECT source_id, test, emitted_at, receipt_id,
        tuple(emitted_at + toIntervalHour(2), emitted_at + toIntervalHour(2), emitted_at, emitted_at + toIntervalHour(1), 1.5, ['hit', 'miss', 'void'][cityHash64(receipt_id) % 3 + 1])
      FROM receipts WHERE cityHash64(receipt_id) % 10 = 0`,
  })
  const scoringS = (performance.now() - t) / 1000
  t = performance.now()
  await client.command({
    query: `INSERT INTO receipts (source_id, test, emitted_at, receipt_id, dispute)
      SELECT source_id, test, emitted_at, receipt_id, tuple(2, emitted_at + toIntervalHour(3), ['disputed', 'rejected'][cityHash64(receipt_id, 1) % 2 + 1])
      FROM receipts WHERE cityHash64(receipt_id, 1) % 100 = 0`,
  })
  return { receiptsS, scoringS, disputesS: (performance.now() - t) / 1000 }
}
