import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/** Another process's resident memory in kB (VmRSS from /proc/<pid>/status): kB, not MB, for per-connection figures. */
export const vmRssKb = (pid: number): number => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)

/** Checks `done` every 50 ms; false if `timeoutMs` passed first. */
export async function waitFor(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs
  while (!done()) {
    if (performance.now() > deadline) return false
    await sleep(50)
  }
  return true
}
