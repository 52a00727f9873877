import { randomBytes } from 'node:crypto'
import { Kvm } from '@nats-io/kv'
import type { KV, KvEntry } from '@nats-io/kv'
import type { NatsConnection } from '@nats-io/transport-node'
import { LogError } from '../../log-error.js'
import type { RevocationBarrier, RevocationScope } from '../ports.js'
import { stateError } from './nats-state-errors.js'

export interface NatsRevocationBarrierOptions {
  readonly nc: NatsConnection
  /** The KV bucket every gateway of one deployment shares. */
  readonly bucket: string
  /** How often this gateway rewrites its presence key. Default 1,000 ms. */
  readonly heartbeatMs?: number
  /** A gateway whose presence was not rewritten for this long is no longer waited for. Default 5 × heartbeatMs. */
  readonly lapseMs?: number
  /** How long `settled` may wait for the other gateways before failing `unavailable`. Default 30,000 ms. */
  readonly settleTimeoutMs?: number
  /**
   * Resolves once this gateway's registry view holds every registry change made durable
   * before now (the composition wires it to the registry's watch): only then is a
   * request's last look guaranteed to see the revocation. Default: at once, for a
   * registry every gateway reads synchronously from one store.
   */
  readonly caughtUp?: (scope: RevocationScope) => Promise<void>
  readonly replicas?: number
  /** Errors of the background work (heartbeats, acknowledgements), which no caller awaits. */
  readonly onWarning?: (message: string, err: unknown) => void
}

interface Hold {
  readonly scope: RevocationScope
  readonly answered: Promise<unknown>
}

const POLL_MS = 10
const ASK_TTL_MS = 10 * 60_000
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const id = () => randomBytes(9).toString('base64url').replace(/[^A-Za-z0-9]/g, '0')

/** Whether a hold under `hold` may be a request a change of `scope` concerns. */
function meets(hold: RevocationScope, scope: RevocationScope | undefined): boolean {
  if (scope === undefined) return true
  if (hold.sourceId !== scope.sourceId) return false
  return scope.keyId === undefined || hold.keyId === undefined || hold.keyId === scope.keyId
}

/**
 * The revocation barrier across gateways, in one KV bucket. The rule: once `settled`
 * resolves on any gateway, every request that may still answer 202 under the scope,
 * on any live gateway, has its answer; requests answered later took their last look
 * after their gateway's registry view showed the change, and are refused.
 *
 * - Presence: each gateway writes `gw.<id>` every `heartbeatMs` (2.9 has no per-key TTL,
 *   so liveness is read from the entry's age), and deletes it at close.
 * - A revoker (`settled`) writes an ask `ask.<askId>` holding the scope, then waits until
 *   every live gateway has written `ack.<askId>.<gatewayId>`.
 * - Each gateway watches the asks (from the current values on, so a gateway that starts
 *   late answers the asks it missed). For an ask it first waits until its registry view
 *   has caught up (`caughtUp`), then for the holds it has under the scope at that moment,
 *   then acknowledges. A hold taken after that moment followed a last look at a view that
 *   showed the change, so it is refused; a hold taken before it is waited for.
 * - A gateway is live while its presence key was rewritten within `lapseMs`, judged both
 *   on the server's clock (its entry against the ask's) and on the revoker's (whether it
 *   changed while the revoker watched): a crashed gateway holds a revocation back for
 *   `lapseMs` at most, and a gateway that is up but stuck for `settleTimeoutMs` makes
 *   `settled` fail `unavailable`, so the revocation is not acknowledged as settled.
 * - Asks and acknowledgements age out with the bucket's TTL (10 minutes), which
 *   heartbeats outrun; the bucket holds a few keys per gateway and per revocation.
 */
export class NatsRevocationBarrier implements RevocationBarrier {
  readonly #kv: KV
  readonly #o: NatsRevocationBarrierOptions
  readonly #gatewayId = id()
  readonly #held = new Set<Hold>()
  readonly #heartbeatMs: number
  readonly #lapseMs: number
  #heartbeat: NodeJS.Timeout | undefined
  readonly #stops: (() => void)[] = []
  /**
   * The gateways whose presence key holds a value: when the server stored it (its clock)
   * and when this process saw it change (this process's clock), so that neither clock
   * alone decides whether a gateway is still live.
   */
  #presenceRevision = 0
  readonly #present = new Map<string, { created: number; seenAt: number }>()
  #closed = false

  private constructor(kv: KV, o: NatsRevocationBarrierOptions) {
    this.#kv = kv
    this.#o = o
    this.#heartbeatMs = o.heartbeatMs ?? 1_000
    this.#lapseMs = o.lapseMs ?? 5 * this.#heartbeatMs
  }

  static async open(o: NatsRevocationBarrierOptions): Promise<NatsRevocationBarrier> {
    try {
      const kv = await new Kvm(o.nc).create(o.bucket, { history: 1, ttl: ASK_TTL_MS, replicas: o.replicas ?? 1 })
      const barrier = new NatsRevocationBarrier(kv, o)
      await barrier.#start()
      return barrier
    } catch (err) {
      throw stateError('opening the revocation barrier', err)
    }
  }

  /** This gateway's id in the bucket. */
  get gatewayId(): string {
    return this.#gatewayId
  }

  async #start(): Promise<void> {
    // The watch first, then the presence: an ask made once this gateway is visible is seen.
    const presence = await this.#kv.watch({ key: 'gw.>' })
    this.#stops.push(() => presence.stop())
    void (async () => {
      for await (const e of presence) this.#sawPresence(e)
    })().catch((err: unknown) => this.#warn('the watch of gateway presence ended', err))
    const watch = await this.#kv.watch({ key: 'ask.>' })
    this.#stops.push(() => watch.stop())
    void (async () => {
      for await (const e of watch) {
        if (e.operation === 'PUT') void this.#acknowledge(e.key.slice('ask.'.length), JSON.parse(e.string()) as RevocationScope | null)
      }
    })().catch((err: unknown) => this.#warn('the watch of revocation asks ended', err))
    const mine = await this.#kv.put(`gw.${this.#gatewayId}`, '')
    // The watch delivers in revision order: once it has shown this gateway's own presence,
    // it has shown every gateway present before, and `settled` may count on the map.
    for (const until = Date.now() + 10_000; this.#presenceRevision < mine; await sleep(1)) {
      if (Date.now() > until) throw new LogError('unavailable', 'ingest state (NATS): the watch of gateway presence did not start; retry')
    }
    this.#heartbeat = setInterval(() => {
      this.#kv.put(`gw.${this.#gatewayId}`, '').catch((err: unknown) => this.#warn('a presence heartbeat failed', err))
    }, this.#heartbeatMs)
    this.#heartbeat.unref()
  }

  #sawPresence(e: KvEntry): void {
    const gw = e.key.slice('gw.'.length)
    this.#presenceRevision = Math.max(this.#presenceRevision, e.revision)
    if (e.operation === 'PUT') this.#present.set(gw, { created: e.created.getTime(), seenAt: Date.now() })
    else this.#present.delete(gw)
  }

  hold(scope: RevocationScope, answered: Promise<unknown>): void {
    const h = { scope, answered }
    this.#held.add(h)
    const forget = () => void this.#held.delete(h)
    answered.then(forget, forget)
  }

  async #acknowledge(askId: string, scope: RevocationScope | null): Promise<void> {
    try {
      await (this.#o.caughtUp?.(scope ?? { sourceId: '' }) ?? Promise.resolve())
      const waiting = [...this.#held].filter((h) => meets(h.scope, scope ?? undefined)).map((h) => h.answered)
      await Promise.allSettled(waiting)
      // The answers follow their appends in promise callbacks: one turn sees them sent.
      await new Promise((resolve) => setImmediate(resolve))
      if (!this.#closed) await this.#kv.put(`ack.${askId}.${this.#gatewayId}`, '')
    } catch (err) {
      this.#warn('acknowledging a revocation failed', err)
    }
  }

  async settled(scope?: RevocationScope): Promise<void> {
    const askId = id()
    const deadline = Date.now() + (this.#o.settleTimeoutMs ?? 30_000)
    const acked = new Set<string>()
    let stop: (() => void) | undefined
    try {
      const acks = await this.#kv.watch({ key: `ack.${askId}.>` })
      stop = () => acks.stop()
      void (async () => {
        for await (const e of acks) if (e.operation === 'PUT') acked.add(e.key.slice(`ack.${askId}.`.length))
      })().catch((err: unknown) => this.#warn('the watch of acknowledgements ended', err))
      await this.#kv.put(`ask.${askId}`, JSON.stringify(scope ?? null))
      const askedAt = (await this.#kv.get(`ask.${askId}`))?.created.getTime() ?? Date.now()
      while (Date.now() < deadline) {
        const waitingFor = [...this.#present].filter(([gw, p]) => {
          const live = p.created >= askedAt - this.#lapseMs && Date.now() - p.seenAt <= this.#lapseMs
          return live && !acked.has(gw)
        })
        if (waitingFor.length === 0) return
        await sleep(POLL_MS)
      }
    } catch (err) {
      throw stateError('waiting for the gateways to settle a revocation', err)
    } finally {
      stop?.()
    }
    throw new LogError('unavailable', 'ingest state (NATS): a gateway did not settle the revocation in time; retry')
  }

  /** Stops the heartbeat and the watch, and withdraws this gateway's presence. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#heartbeat)
    for (const stop of this.#stops) stop()
    await this.#kv.delete(`gw.${this.#gatewayId}`).catch((err: unknown) => this.#warn('withdrawing the presence failed', err))
  }

  #warn(message: string, err: unknown): void {
    this.#o.onWarning?.(message, err)
  }
}
