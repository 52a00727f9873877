import type { Settings } from './settings.js'

/**
 * What a command prints on stdout: with --json, exactly one JSON document (a list command
 * prints `{"data": [...], "next_cursor": ...}`), so scripts can pipe it to jq; otherwise
 * lines for people. Progress and notes go to stderr, never mixed into stdout.
 */
export function printResult(s: Settings, value: unknown, human: () => string): void {
  process.stdout.write(s.json ? `${JSON.stringify(value)}\n` : `${human()}\n`)
}

/** An object as `key: value` lines; nested values as compact JSON. */
export function fields(value: Record<string, unknown>): string {
  return Object.entries(value)
    .map(([k, v]) => `${k}: ${typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}`)
    .join('\n')
}

/** Rows as aligned columns with a header line; an empty list says so. */
export function table(rows: readonly Record<string, unknown>[], columns: readonly string[], nextCursor?: string | null): string {
  if (rows.length === 0) return '(none)'
  const cell = (v: unknown) => (v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v))
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)))
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] as number)).join('  ').trimEnd()
  const out = [line([...columns]), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))]
  if (nextCursor) out.push(`next page: --cursor ${nextCursor}`)
  return out.join('\n')
}

/** A note for people on stderr (never with --json, whose stdout is one document; notes still go to stderr). */
export function note(message: string): void {
  process.stderr.write(`${message}\n`)
}
