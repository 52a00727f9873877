/**
 * Messages between the orchestrator (`run.ts`) and the load generator
 * (`load-generator.ts`), which run as separate processes so that the client's CPU
 * shows up as a separate process and never shares an event loop with the sampler.
 */

/** What the load generator needs to sign as one source. */
export interface SourceKey {
  readonly sourceId: string
  readonly keyId: string
  /** base64 of the 32-byte Ed25519 seed (harness/signed-push.ts `creatorKeyFromSeed`). */
  readonly seedBase64: string
}

export interface PhaseSpec {
  readonly name: string
  /** closed: each connection sends its next request when the previous one is answered. open: paced at `ratePerS`. */
  readonly mode: 'closed' | 'open'
  readonly connections: number
  readonly durationMs: number
  /** Requests sent per second across all connections (open mode only). */
  readonly ratePerS?: number
  /** Requests to pre-sign before the clock starts; running out ends the phase early. */
  readonly budget: number
  /** Where to send, if not the gateway (the latency floor's server). */
  readonly port?: number
}

export interface PhaseResult {
  readonly name: string
  readonly mode: 'closed' | 'open'
  readonly connections: number
  /** Length of the measuring window, ms (shorter than asked if the budget ran out). */
  readonly windowMs: number
  readonly signed: number
  readonly signMs: number
  readonly sent: number
  /** Responses received inside the window, by HTTP status. */
  readonly statuses: Record<string, number>
  /** 503 responses without a Retry-After header. */
  readonly shedWithoutRetryAfter: number
  /** 503 "overloaded" requests put back for reuse (never verified, so the nonce is unspent). */
  readonly recycled: number
  /** A connection closed while a request was outstanding (no response). */
  readonly dropped: number
  readonly connectErrors: number
  /** Open mode: scheduled requests still unanswered at the drain deadline (their latency would exceed it). */
  readonly unanswered: number
  readonly exhausted: boolean
  /** Latency histogram counts (see histogram.ts), responses of every status. */
  readonly latency: number[]
  /** Latency of 202 responses only. */
  readonly acceptedLatency: number[]
  /** First few responses that were neither 202 nor 503 overloaded: status line and body. */
  readonly unexpected: string[]
  readonly loadgenCpuMs: number
}

export type ToLoadGenerator =
  | { kind: 'init'; port: number; sources: SourceKey[]; tag: string }
  | { kind: 'phase'; spec: PhaseSpec }
  | { kind: 'exit' }

export type FromLoadGenerator =
  | { kind: 'ready' }
  | { kind: 'started'; name: string }
  | { kind: 'result'; result: PhaseResult }
  | { kind: 'error'; message: string }
