import type { PhaseFigures } from './report.js'
import type { PhaseSpec } from './protocol.js'

/**
 * The benchmark's parameters, in one place: command line, phase lengths, connection
 * counts, how many requests to pre-sign, and the targets of the issue.
 *
 *   node dist/bench/ingest/run.js [--sweep] [--connections=N] [--cpu-prof=DIR] [GATEWAY_VAR=value ...]
 *
 * Arguments of the form NAME=value are passed to the gateway's environment.
 * `--cpu-prof=DIR` makes the gateway write V8 CPU profiles of its threads into DIR.
 */

export const CEILING_MS = 3_000
/** The machine's own scheduling noise, measured next to each ceiling (cpu-noise.ts). */
export const NOISE_MS = 5_000
export const SOURCES = 16
/**
 * Connections of the peak and half-peak phases. One request is in flight per
 * connection, so with few of them the gateway's stages run in lock-step and the
 * accepted rate measures the client's concurrency, not the gateway: here 64 gave
 * ~12k/s and 256 ~15.5k/s. 256 stays under the default VERIFY_QUEUE_LIMIT, so the
 * peak phase measures accepting, not shedding. `--connections=N` overrides it.
 */
const DEFAULT_CONNECTIONS = 256
export const OVERLOAD_CONNECTIONS = 2_000
/** File descriptors the load generator needs besides its sockets (stdio, IPC, workers, node internals). */
export const SPARE_FDS = 100
export const PHASE_MS = { warmUp: 3_000, peak: 10_000, halfPeak: 10_000, overload: 8_000 }
export const SWEEP_MS = { warmUp: 2_000, peak: 8_000 }
export const SWEEP = { threads: [1, 2], batch: [16, 64, 256] }
/**
 * Requests are signed before each phase at about 25k/s (two threads), so the budget
 * is sized from what the gateway just did: the warm-up gets one core's verify rate,
 * the peak 1.6 × the warm-up rate (a warm JIT is faster), never more than 2.5 × the
 * ceiling, which two cores cannot exceed. Running out ends a window early, visibly.
 */
export const WARM_UP_BUDGET_PER_CEILING = 1
const PEAK_BUDGET_PER_WARM_UP = 1.6
const MAX_BUDGET_PER_CEILING = 2.5
/** Overload: shed requests are re-sent (never verified, nonce unspent), so only accepts use up the budget. */
export const OVERLOAD_BUDGET_PER_PEAK = 1.5
/** Never size a phase's budget below this rate, so a slow warm-up cannot starve the peak. */
export const MIN_BUDGET_RATE = 2_000
export const TARGETS = { ratio: 1.0, p99Ms: 10, rssMb: 300 }

const args = process.argv.slice(2)
export const SWEEP_MODE = args.includes('--sweep')
export const GATEWAY_ENV: Record<string, string> = Object.fromEntries(
  args.filter((a) => /^[A-Z][A-Z0-9_]*=/.test(a)).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
)
const connectionsArg = args.find((a) => a.startsWith('--connections='))
export const CONNECTIONS = connectionsArg === undefined ? DEFAULT_CONNECTIONS : Number(connectionsArg.slice('--connections='.length))
if (!Number.isInteger(CONNECTIONS) || CONNECTIONS < 1) throw new Error(`--connections must be a positive integer, got ${connectionsArg}`)
const cpuProfArg = args.find((a) => a.startsWith('--cpu-prof='))
/** Node flags of the gateway process: empty unless profiling was asked for. */
export const GATEWAY_NODE_ARGS = cpuProfArg === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${cpuProfArg.slice('--cpu-prof='.length)}`]
const unknown = args.filter((a) => a !== '--sweep' && a !== connectionsArg && a !== cpuProfArg && !/^[A-Z][A-Z0-9_]*=/.test(a))
if (unknown.length > 0) throw new Error(`unknown arguments ${unknown.join(' ')}: use --sweep, --connections=N, --cpu-prof=DIR or GATEWAY_VAR=value`)

export const closedSpec = (name: string, connections: number, durationMs: number, ratePerS: number): PhaseSpec => ({
  name,
  mode: 'closed',
  connections,
  durationMs,
  budget: Math.ceil((ratePerS * durationMs) / 1000),
})

export function peakBudgetRate(warm: PhaseFigures, verifyCeiling: number): number {
  return Math.min(verifyCeiling * MAX_BUDGET_PER_CEILING, Math.max(MIN_BUDGET_RATE, warm.acceptedPerS * PEAK_BUDGET_PER_WARM_UP))
}
