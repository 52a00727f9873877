/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for tests:
 * it throws on the first line a Prometheus server would refuse or misread, and returns
 * the metric families with their samples. prom-client writes the format but has no
 * reader, and a regular expression per metric would accept a page Prometheus rejects.
 */

export type MetricKind = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped'

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface Family {
  readonly name: string
  readonly type: MetricKind
  help: string | undefined
  readonly samples: Sample[]
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*'
const LABEL_NAME = '[a-zA-Z_][a-zA-Z0-9_]*'
/** A label value: any character but `"`, `\` and a newline, or one of the three escapes. */
const LABEL_VALUE = '(?:[^"\\\\\\n]|\\\\[\\\\"n])*'
/** Go's ParseFloat, as Prometheus reads values: decimal or exponent forms, NaN and ±Inf in any case. */
const VALUE = '(?:[+-]?(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?[Ii][Nn][Ff](?:[Ii][Nn][Ii][Tt][Yy])?|[Nn][Aa][Nn])'
const SAMPLE_LINE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL_NAME}="${LABEL_VALUE}"(?:,${LABEL_NAME}="${LABEL_VALUE}")*,?)?)\\})? (${VALUE})(?: -?[0-9]+)?$`)
const LABEL = new RegExp(`(${LABEL_NAME})="(${LABEL_VALUE})"`, 'g')
const HELP_LINE = new RegExp(`^# HELP (${NAME}) (.*)$`)
const TYPE_LINE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`)

const unescape = (s: string) => s.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))

/** The family a sample line belongs to: a histogram's `_bucket`, `_sum` and `_count` are its own. */
function familyOf(families: Map<string, Family>, sampleName: string): Family | undefined {
  const own = families.get(sampleName)
  if (own !== undefined) return own
  const suffix = /_(bucket|sum|count)$/.exec(sampleName)
  if (suffix === null) return undefined
  const family = families.get(sampleName.slice(0, -suffix[0].length))
  if (family === undefined || (family.type !== 'histogram' && family.type !== 'summary')) return undefined
  return suffix[1] === 'bucket' && family.type !== 'histogram' ? undefined : family
}

export function parsePrometheusText(page: string): Map<string, Family> {
  if (!page.endsWith('\n')) throw new Error('the page does not end with a newline')
  const families = new Map<string, Family>()
  const seen = new Set<string>()
  const seenNames = new Set<string>()
  /** HELP lines by name: a HELP may come before its TYPE. */
  const helps = new Map<string, string>()
  page.slice(0, -1).split('\n').forEach((line, i) => {
    const where = `line ${i + 1} (${JSON.stringify(line)})`
    if (line === '') return
    if (line.startsWith('#')) {
      const type = TYPE_LINE.exec(line)
      if (type !== null) {
        const [, name, kind] = type as unknown as [string, string, MetricKind]
        if (families.has(name)) throw new Error(`${where}: a second TYPE for ${name}`)
        if (seenNames.has(name)) throw new Error(`${where}: TYPE after samples named ${name}`)
        families.set(name, { name, type: kind, help: undefined, samples: [] })
        return
      }
      const help = HELP_LINE.exec(line)
      // Other comments are allowed; a malformed HELP or TYPE is not.
      if (help === null && /^# (HELP|TYPE)\b/.test(line)) throw new Error(`${where}: malformed`)
      if (help !== null) helps.set(help[1] as string, unescape(help[2] as string))
      return
    }
    const match = SAMPLE_LINE.exec(line)
    if (match === null) throw new Error(`${where}: not a sample line`)
    const [, name, labelText, valueText] = match as unknown as [string, string, string | undefined, string]
    const labels: Record<string, string> = {}
    for (const [, k, v] of (labelText ?? '').matchAll(LABEL)) {
      if ((k as string) in labels) throw new Error(`${where}: label ${k} twice`)
      labels[k as string] = unescape(v as string)
    }
    const family = familyOf(families, name)
    if (family === undefined) throw new Error(`${where}: no TYPE line before ${name}`)
    const key = `${name}{${Object.entries(labels).sort().map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}}`
    if (seen.has(key)) throw new Error(`${where}: ${key} twice`)
    seen.add(key)
    seenNames.add(name)
    family.samples.push({ name, labels, value: Number(/nan/i.test(valueText) ? Number.NaN : /inf/i.test(valueText) ? (valueText.startsWith('-') ? -Infinity : Infinity) : valueText) })
  })
  for (const [name, help] of helps) {
    const family = families.get(name)
    if (family === undefined) throw new Error(`HELP for ${name}, which has no TYPE`)
    family.help = help
  }
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family)
  return families
}

/** Buckets by ascending `le` ending at +Inf, cumulative, +Inf equal to `_count`, per label set. */
function checkHistogram(family: Family): void {
  const groups = new Map<string, Sample[]>()
  for (const s of family.samples) {
    const { le, ...rest } = s.labels
    const key = JSON.stringify(Object.entries(rest).sort())
    if (!groups.has(key)) groups.set(key, [])
    ;(groups.get(key) as Sample[]).push(s)
  }
  for (const [key, samples] of groups) {
    const buckets = samples.filter((s) => s.name === `${family.name}_bucket`)
    const count = samples.find((s) => s.name === `${family.name}_count`)
    const sum = samples.find((s) => s.name === `${family.name}_sum`)
    if (count === undefined || sum === undefined) throw new Error(`${family.name}${key}: no _count or _sum`)
    const bounds = buckets.map((b) => (b.labels['le'] === '+Inf' ? Infinity : Number(b.labels['le'])))
    if (bounds.some((b) => Number.isNaN(b))) throw new Error(`${family.name}${key}: a bucket without a numeric le`)
    if (bounds.at(-1) !== Infinity) throw new Error(`${family.name}${key}: no le="+Inf" bucket last`)
    for (let i = 1; i < buckets.length; i++) {
      if ((bounds[i] as number) <= (bounds[i - 1] as number)) throw new Error(`${family.name}${key}: le not ascending`)
      if ((buckets[i] as Sample).value < (buckets[i - 1] as Sample).value) throw new Error(`${family.name}${key}: buckets not cumulative`)
    }
    if ((buckets.at(-1) as Sample).value !== count.value) throw new Error(`${family.name}${key}: +Inf bucket differs from _count`)
  }
}

/** The one sample of `name` with exactly `labels`, or undefined. */
export function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const family of families.values()) {
    for (const s of family.samples) {
      if (s.name !== name) continue
      const keys = Object.keys(s.labels)
      if (keys.length === Object.keys(labels).length && keys.every((k) => s.labels[k] === labels[k])) return s.value
    }
  }
  return undefined
}

/**
 * The naming rules the gateway keeps (Prometheus conventions): counters end `_total`;
 * a histogram measures a duration and is in seconds; nothing is in milliseconds; of the
 * gateway's own (`sgw_`) metrics, only counters end `_total`. Returns the breaches.
 */
export function namingBreaches(families: Map<string, Family>): string[] {
  const breaches: string[] = []
  for (const f of families.values()) {
    if (f.type === 'counter' && !f.name.endsWith('_total')) breaches.push(`counter ${f.name} does not end _total`)
    if (f.type === 'histogram' && !f.name.endsWith('_seconds')) breaches.push(`histogram ${f.name} does not end _seconds`)
    if (/_(ms|milliseconds|millis|us|microseconds|ns)(_|$)/.test(f.name)) breaches.push(`${f.name} is not in base units`)
    if (f.name.startsWith('sgw_') && f.name.endsWith('_total') && f.type !== 'counter') breaches.push(`${f.type} ${f.name} ends _total`)
    if (f.help === undefined || f.help === '') breaches.push(`${f.name} has no HELP`)
  }
  return breaches
}
