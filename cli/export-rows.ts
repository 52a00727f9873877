/**
 * Where a NDJSON or CSV export file ends in whole rows. A cut transfer leaves a partial row
 * at the end; the tracker follows the bytes as they are written and knows, at any moment,
 * how many bytes hold complete rows and what the last complete data row was, so the file
 * can be cut back to that and the export continued right after that row.
 *
 * NDJSON: a row ends at each line feed (JSON strings escape theirs). CSV: a row ends at a
 * line feed outside quotes (a note may hold a quoted newline; a doubled quote toggles
 * twice, so the state stays right); the first row of a file started from the beginning is
 * the header line, which is no data row.
 */
export class ExportRowTracker {
  readonly #csv: boolean
  #inQuotes = false
  #headerLeft: boolean
  #pending: Buffer[] = []
  /** Bytes of the file that hold complete rows (the header line included). */
  completeBytes = 0
  /** Data rows complete so far. */
  rows = 0
  /** The last complete data row's bytes, without its line feed. */
  lastRow: Buffer | undefined

  constructor(format: 'ndjson' | 'csv', options: { startsWithHeader: boolean }) {
    this.#csv = format === 'csv'
    this.#headerLeft = this.#csv && options.startsWithHeader
  }

  add(chunk: Buffer): void {
    let start = 0
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]
      if (this.#csv && c === 34) this.#inQuotes = !this.#inQuotes
      else if (c === 10 && !this.#inQuotes) {
        const row = Buffer.concat([...this.#pending, chunk.subarray(start, i)])
        this.#pending = []
        this.completeBytes += row.length + 1
        start = i + 1
        if (this.#headerLeft) this.#headerLeft = false
        else {
          this.rows++
          this.lastRow = row
        }
      }
    }
    if (start < chunk.length) this.#pending.push(Buffer.from(chunk.subarray(start)))
  }
}

/** The export's `after` for the row: `<source_id>,<emitted_at>,<receipt_id>`, read from the row as the format writes it. */
export function positionOf(format: 'ndjson' | 'csv', row: Buffer): string {
  if (format === 'ndjson') {
    const r = JSON.parse(row.toString('utf8')) as { source_id: string; emitted_at: string; receipt_id: string }
    return `${r.source_id},${r.emitted_at},${r.receipt_id}`
  }
  // The export's columns: receipt_id, source_id, ... emitted_at is the tenth.
  const f = csvFields(row.toString('utf8'))
  return `${f[1]},${toIso(f[9] as string)},${f[0]}`
}

/** ClickHouse's CSV writes `2030-01-31 12:00:00.000`; the API takes ISO 8601 UTC. */
const toIso = (t: string) => (/^\d{4}-\d{2}-\d{2} /.test(t) ? `${t.replace(' ', 'T')}Z` : t)

/** The fields of one CSV record (RFC 4180: quoted fields, doubled quotes inside). */
export function csvFields(record: string): string[] {
  const out: string[] = []
  let field = ''
  let quoted = false
  for (let i = 0; i < record.length; i++) {
    const c = record[i]
    if (quoted) {
      if (c === '"' && record[i + 1] === '"') {
        field += '"'
        i++
      } else if (c === '"') quoted = false
      else field += c
    } else if (c === '"') quoted = true
    else if (c === ',') {
      out.push(field)
      field = ''
    } else field += c
  }
  out.push(field)
  return out
}
