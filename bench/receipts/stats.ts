/** p-th percentile (nearest rank) of `xs`, in the units given. */
export function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((sorted.length * p) / 100) - 1))] ?? Number.NaN
}

export interface Timing {
  readonly runs: number
  readonly p50_ms: number
  readonly p95_ms: number
  readonly max_ms: number
}

const round = (x: number) => Math.round(x * 10) / 10

/** Runs `fn` `warmup` times untimed, then `runs` times timed, one after another. */
export async function timed(runs: number, fn: (i: number) => Promise<unknown>, warmup = 3): Promise<Timing> {
  for (let i = 0; i < warmup; i++) await fn(runs + i)
  const out: number[] = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    await fn(i)
    out.push(performance.now() - t)
  }
  return { runs, p50_ms: round(percentile(out, 50)), p95_ms: round(percentile(out, 95)), max_ms: round(Math.max(...out)) }
}

/** Samples this process's RSS every 50 ms until stopped: start, peak and end in MB. */
export function rssSampler(): { stop(): { start_mb: number; peak_mb: number; end_mb: number } } {
  const mb = () => Math.round(process.memoryUsage().rss / 1e6)
  const start = mb()
  let peak = start
  const timer = setInterval(() => { peak = Math.max(peak, mb()) }, 50)
  return {
    stop() {
      clearInterval(timer)
      const end = mb()
      return { start_mb: start, peak_mb: Math.max(peak, end), end_mb: end }
    },
  }
}
