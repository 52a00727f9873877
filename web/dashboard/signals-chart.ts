import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { el } from './dom.js'

/** One bucket of `GET /v1/byo/sources/:source_id/stats`. */
export interface StatsBucket {
  readonly start: string
  readonly total: number
  readonly severity: Readonly<Record<string, number>>
}

const COLOURS = ['#1f77b4', '#ff7f0e', '#d62728', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf']

/**
 * Signals per minute by severity: one line per severity over the buckets of the window.
 * uPlot draws on a canvas and sets its sizes through the style properties (not inline
 * style attributes), which the page's Content-Security-Policy allows.
 */
export function signalsChart(buckets: readonly StatsBucket[], width: number): HTMLElement {
  const severities = [...new Set(buckets.flatMap((b) => Object.keys(b.severity)))].sort()
  const holder = el('div', { class: 'chart', 'data-severities': severities.join(',') })
  const x = buckets.map((b) => Date.parse(b.start) / 1000)
  const series = severities.map((s) => buckets.map((b) => b.severity[s] ?? 0))
  const options: uPlot.Options = {
    width,
    height: 220,
    scales: { x: { time: true } },
    axes: [{}, { label: 'signals per minute' }],
    series: [{}, ...severities.map((s, i) => ({ label: s, stroke: COLOURS[i % COLOURS.length] as string, width: 2 }))],
  }
  new uPlot(options, [x, ...series] as uPlot.AlignedData, holder)
  return holder
}
