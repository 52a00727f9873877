/**
 * The samples of a Prometheus text page, by metric name: each `name{labels} value` line as
 * its labels and value (comments and malformed lines skipped).
 */
export function samplesOf(text: string): Map<string, { labels: Record<string, string>; value: number }[]> {
  const out = new Map<string, { labels: Record<string, string>; value: number }[]>()
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line)
    if (m === null) continue
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = l[2] as string
    const list = out.get(m[1] as string) ?? []
    list.push({ labels, value: Number(m[3]) })
    out.set(m[1] as string, list)
  }
  return out
}
