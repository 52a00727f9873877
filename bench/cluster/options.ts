/**
 * The cluster benchmark's parameters (`npm run bench:cluster [-- --quick]`). `--quick`
 * shortens every phase and shrinks the SSE and revocation phases, for a smoke run of
 * the whole sequence in about a minute; its figures are not the benchmark's.
 */
const args = process.argv.slice(2)
const unknown = args.filter((a) => a !== '--quick' && a !== '--single-nats')
if (unknown.length > 0) throw new Error(`unknown arguments ${unknown.join(' ')}: use --quick or --single-nats`)

export const QUICK = args.includes('--quick')
/** One nats-server instead of a cluster of three (R1): for a machine that cannot afford three. */
export const SINGLE_NATS = args.includes('--single-nats')
/** The ingest benchmark's load shape. */
export const CONNECTIONS = 256
export const SOURCES = 16
export const PHASE_MS = QUICK ? { warmUp: 1_000, peak: 3_000, halfPeak: 3_000 } : { warmUp: 3_000, peak: 10_000, halfPeak: 10_000 }
/** Requests pre-signed per phase, as a multiple of the single-core verify rate × the phase's seconds (two cores cannot exceed 2.5×). */
export const BUDGET_PER_CEILING = 1.6
/** SSE: 1,000 streams (10 per rental over 100 rentals on 10 sources) at 1,000 signals/s. */
export const SSE = QUICK ? { sources: 10, rentals: 20, perRental: 10, rate: 200, seconds: 2 } : { sources: 10, rentals: 100, perRental: 10, rate: 1_000, seconds: 10 }
export const REVOCATIONS = QUICK ? 5 : 30
export const GOALS = { natsRatio: 0.6, recorderLagP99S: 1, sseP99Ms: 20, halfPeakWithExportP99Ms: 20, revocationP99Ms: 100 }
