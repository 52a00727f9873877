import { readdirSync, readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'

/**
 * How much of the machine is not ours: one thread per core spins and records every
 * moment it did not run (a gap in its clock of more than half a millisecond), while the
 * CPU time of every other task on the machine is read from /proc. A latency tail of a
 * few milliseconds is meaningless on a machine whose cores are taken away for that long;
 * this puts the figure for the machine in the same run as the figures for the gateway.
 */

const GAP_MS = 0.5
/** A stall at least this long reaches the half-peak target's order of magnitude. */
const LONG_STALL_MS = 4

export interface CpuNoise {
  readonly seconds: number
  readonly threads: number
  /** Summed over the spinning threads. */
  readonly lostMs: number
  readonly longestMs: number
  readonly longStalls: number
  /** Other tasks that ran during the probe, most CPU first (ms). */
  readonly others: readonly { readonly name: string; readonly ms: number }[]
}

// Every spinner starts at the same instant (a barrier on shared memory): while one is
// still booting, the other would count the boot's CPU as the machine's noise.
const SPINNER = `
const { workerData, parentPort } = require('node:worker_threads')
const go = new Int32Array(workerData.go)
parentPort.postMessage(require('node:fs').readlinkSync('/proc/thread-self'))
Atomics.wait(go, 0, 0)
const end = performance.now() + workerData.ms
const gaps = []
let last = performance.now()
for (;;) {
  const now = performance.now()
  if (now - last > ${GAP_MS}) gaps.push(now - last)
  last = now
  if (now > end) break
}
parentPort.postMessage(gaps)
`

export async function measureCpuNoise(ms: number): Promise<CpuNoise> {
  const threads = availableParallelism()
  const go = new SharedArrayBuffer(4)
  const goFlag = new Int32Array(go)
  const workers = Array.from({ length: threads }, () => new Worker(SPINNER, { eval: true, workerData: { ms, go } }))
  const next = (w: Worker) => new Promise<unknown>((resolve, reject) => {
    w.once('message', resolve)
    w.once('error', reject)
  })
  // Left out: each spinner's own task (pid/task/tid), and this thread, which only waits
  // (its reading of /proc lands in the figures). This process's other threads count as
  // noise like any task: a collection of its heap takes the cores as well.
  const leftOut = new Set([`${process.pid}/${process.pid}`])
  for (const self of await Promise.all(workers.map(next))) leftOut.add(String(self).replace(/^.*?(\d+)\/task\/(\d+)$/, '$1/$2'))
  const runs = workers.map(next)
  const before = taskCpuMs()
  Atomics.store(goFlag, 0, 1)
  Atomics.notify(goFlag, 0)
  const gaps = (await Promise.all(runs)).flat() as number[]
  const after = taskCpuMs()
  const others = new Map<string, number>()
  for (const [id, task] of after) {
    if (leftOut.has(id)) continue
    const spent = task.ms - (before.get(id)?.ms ?? 0)
    if (spent > 0) others.set(task.name, (others.get(task.name) ?? 0) + spent)
  }
  return {
    seconds: ms / 1000,
    threads,
    lostMs: gaps.reduce((sum, g) => sum + g, 0),
    longestMs: gaps.reduce((max, g) => Math.max(max, g), 0),
    longStalls: gaps.filter((g) => g >= LONG_STALL_MS).length,
    others: [...others].map(([name, spent]) => ({ name, ms: spent })).sort((a, b) => b.ms - a.ms),
  }
}

export function cpuNoiseLine(n: CpuNoise): string {
  const top = n.others.slice(0, 3).filter((o) => o.ms >= 1).map((o) => `${o.name} ${o.ms.toFixed(0)} ms`)
  return (
    `cpu noise: ${n.threads} threads spinning ${n.seconds} s lost ${n.lostMs.toFixed(0)} ms in all, longest stall ${n.longestMs.toFixed(1)} ms,` +
    ` ${n.longStalls} stalls >= ${LONG_STALL_MS} ms; other tasks meanwhile: ${top.length === 0 ? 'none above 1 ms' : top.join(', ')}`
  )
}

/** CPU time of every task (thread) on the machine, by pid/tid; empty where /proc is absent. */
function taskCpuMs(): Map<string, { name: string; ms: number }> {
  const tasks = new Map<string, { name: string; ms: number }>()
  let pids: string[]
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d))
  } catch {
    return tasks
  }
  for (const pid of pids) {
    let tids: string[]
    try {
      tids = readdirSync(`/proc/${pid}/task`)
    } catch {
      continue // exited meanwhile
    }
    for (const tid of tids) {
      try {
        const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])
        const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim()
        tasks.set(`${pid}/${tid}`, { name: pid === String(process.pid) ? `${name} (bench)` : name, ms: ns / 1e6 })
      } catch {
        // exited meanwhile
      }
    }
  }
  return tasks
}
