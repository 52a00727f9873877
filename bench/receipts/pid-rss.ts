import { readFileSync } from 'node:fs'

/**
 * Another process's resident memory (the gateway's), read from /proc/<pid>/status every
 * 100 ms: VmRSS at the start of a window, the highest sample inside it, and at its end.
 * VmHWM, the kernel's own high-water mark over the process's life, is read too, so a spike
 * shorter than the period still shows in `hwm_mb`.
 */

const PERIOD_MS = 100

export interface RssWindow {
  readonly start_mb: number
  readonly peak_mb: number
  readonly end_mb: number
  /** VmHWM at the end of the window: the process's peak since it started. */
  readonly hwm_mb: number
}

function statusMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m === null ? 0 : Math.round(Number(m[1]) / 1024)
  } catch {
    return 0 // the process has exited
  }
}

export const rssOf = (pid: number) => statusMb(pid, 'VmRSS')

/** Starts sampling `pid` now; `stop()` ends the window and returns its figures in MB. */
export function pidRssWindow(pid: number): { stop(): RssWindow } {
  const start = rssOf(pid)
  let peak = start
  const timer = setInterval(() => {
    peak = Math.max(peak, rssOf(pid))
  }, PERIOD_MS)
  return {
    stop() {
      clearInterval(timer)
      const end = rssOf(pid)
      return { start_mb: start, peak_mb: Math.max(peak, end), end_mb: end, hwm_mb: statusMb(pid, 'VmHWM') }
    },
  }
}
