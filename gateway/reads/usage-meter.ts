/** Who a count belongs to: a token's role and subject (every token of one subject counts together). */
export interface UsageCaller {
  readonly role: string
  readonly subject: string
}

/** A caller's export rows in one UTC month, with the days that had any. */
export interface UsageMonth {
  readonly role: string
  readonly subject: string
  /** `YYYY-MM`. */
  readonly month: string
  readonly rows_exported: number
  /** Days (`YYYY-MM-DD`) in order, each with its rows. */
  readonly days: readonly { readonly day: string; readonly rows_exported: number }[]
}

/**
 * The export meter: rows delivered, per caller and UTC day. `add` only counts in memory;
 * the counts reach the store in batches (one write per caller and month at a time), so a
 * large export costs a handful of writes, not one per chunk.
 */
export interface UsageMeter {
  add(caller: UsageCaller, rows: number, at?: number): void
  /** The month's counts, those not yet written included. */
  read(caller: UsageCaller, month: string): Promise<UsageMonth>
  /** Writes what was counted so far. */
  flush(): Promise<void>
  /** Flushes and stops the timer. Safe to call twice. */
  close(): Promise<void>
}
