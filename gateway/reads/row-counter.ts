import { parquetMetadata } from 'hyparquet'
import type { ExportFormat } from '../../receipts/index.js'

/** Bytes of a Parquet export's end kept to read its footer (the row count) once it is out. */
const PARQUET_TAIL_BYTES = 1 << 20

/**
 * Counts the rows of an export as its bytes go out, for the meter. NDJSON: one line per
 * row (JSON strings escape their newlines). CSV: line ends outside quotes, less the header
 * line (a note may hold a newline, which CSV quotes). Parquet: rows are only readable with
 * the footer, which comes last, so the file's rows count when it has gone out whole, from
 * the footer's own row count; a Parquet export cut short counts none (what went out cannot
 * be read without its footer).
 */
export class RowCounter {
  readonly #format: ExportFormat
  #inQuotes = false
  #headerLeft: boolean
  #tail: Buffer = Buffer.alloc(0)

  /** `csvHeader`: false for a continued CSV export, which goes out without its header line. */
  constructor(format: ExportFormat, options: { readonly csvHeader?: boolean } = {}) {
    this.#format = format
    this.#headerLeft = options.csvHeader ?? true
  }

  /** Rows completed by `chunk`. */
  add(chunk: Uint8Array): number {
    if (this.#format === 'parquet') {
      const joined = Buffer.concat([this.#tail, chunk])
      this.#tail = joined.length <= PARQUET_TAIL_BYTES ? joined : Buffer.from(joined.subarray(joined.length - PARQUET_TAIL_BYTES))
      return 0
    }
    let rows = 0
    if (this.#format === 'ndjson') {
      for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) rows++
      return rows
    }
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]
      // A doubled quote inside a field toggles twice: the state stays right.
      if (c === 34) this.#inQuotes = !this.#inQuotes
      else if (c === 10 && !this.#inQuotes) {
        if (this.#headerLeft) this.#headerLeft = false
        else rows++
      }
    }
    return rows
  }

  /** Rows counted only at the end (Parquet's, from its footer); 0 for the line formats. */
  finish(): number {
    if (this.#format !== 'parquet' || this.#tail.length < 8) return 0
    return Number(parquetMetadata(new Uint8Array(this.#tail)).num_rows)
  }
}
