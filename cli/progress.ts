import cliProgress from 'cli-progress'

/** A progress line on stderr when it is a terminal; nothing otherwise (a pipe or a log gets no control characters). */
export interface Progress {
  total(n: number): void
  increment(n?: number): void
  stop(): void
}

/** `total` 0: a count without a bar (an export does not know its rows ahead). */
export function progress(label: string, total: number, unit: string): Progress {
  if (process.stderr.isTTY !== true) return { total() {}, increment() {}, stop() {} }
  const format = total === 0 && unit !== 'signals' ? `${label} {value} ${unit}` : `${label} [{bar}] {value}/{total} ${unit}`
  const bar = new cliProgress.SingleBar({ format, stream: process.stderr, hideCursor: true }, cliProgress.Presets.shades_classic)
  bar.start(total, 0)
  return {
    total: (n) => bar.setTotal(n),
    increment: (n = 1) => bar.increment(n),
    stop: () => bar.stop(),
  }
}
