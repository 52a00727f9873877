import type { SignalLog } from '../../pipeline/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import type { LiveTail } from '../live-tail.js'
import type { RentalDisputes } from '../rental-events.js'
import type { CatchUpReads } from './catch-up-reads.js'
import type { WebhookEndpoint, WebhookState } from './webhook-state.js'
import type { AttemptOutcome } from './webhook-worker.js'

/** What a rental's loop uses of the workers around it. */
export interface LoopContext {
  readonly log: SignalLog
  readonly state: WebhookState
  readonly tail: LiveTail
  readonly now: () => number
  readonly retryDelaysMs: readonly number[]
  readonly retryWindowMs: number
  readonly disableAfterMs: number
  rental(rentalId: string): RentalRecord | undefined
  /** The accepted disputes, whose events the loop delivers in their place (the registry). */
  readonly disputes: RentalDisputes
  /** Whether this process still holds the rental's lease shard: checked before each attempt. */
  owns(rentalId: string): boolean
  /** The endpoint as last seen through the store's watch (or written by this process). */
  endpoint(rentalId: string): WebhookEndpoint | undefined
  markEndpoint(rentalId: string, change: (e: WebhookEndpoint) => WebhookEndpoint): Promise<void>
  /** One POST to the endpoint, signed with its scheme, within the workers' bound on attempts under way. */
  send(endpoint: WebhookEndpoint, webhookId: string, body: string, at: number): Promise<AttemptOutcome>
  /** The shared catch-up reads of the log (catch-up-reads.ts). */
  readonly catchUp: CatchUpReads
  onAttempt(result: string): void
  onDeadLetter(): void
  /** A signal's first delivery: milliseconds from the log storing it to the receiver's 2xx. */
  onDelivered(latencyMs: number): void
}
