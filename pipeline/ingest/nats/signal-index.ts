import { createHash } from 'node:crypto'
import { DiscardPolicy, jetstream } from '@nats-io/jetstream'
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream'
import { nanos } from '@nats-io/transport-node'
import type { NatsConnection } from '@nats-io/transport-node'
import type { AcceptedSignal, SignalCheck, SignalCheckRequest, SignalIndex, SignalReservation } from '../ports.js'
import { apiCodeOf, STATE_API_CODE, stateError } from './nats-state-errors.js'
import { checkNames, ensureStream } from './stream-setup.js'
import { subjectToken } from './subject-token.js'

export interface NatsSignalIndexOptions {
  readonly nc: NatsConnection
  /** Streams are `<stream>_<partition>`, one per partition. */
  readonly stream: string
  /** Subjects are `<subjectPrefix>.<partition>.<token of (source, id)>`. */
  readonly subjectPrefix: string
  /** Sources are spread over this many streams by a hash of the source id; each may be placed on other servers. */
  readonly partitions: number
  /** Within it a retry with the same body replays the first 202, another body conflicts. */
  readonly dedupWindowMs: number
  /** How long an accepted id is remembered (max_age, at least the window): past the window and within this, it is `reused`. */
  readonly retainMs: number
  /** Entries all partitions together may hold (each stream's max_msgs is its share): past it a new signal is `store_full`. */
  readonly maxEntries: number
  /** How long a reservation holds its ids if its gateway dies before it ends. Default 30,000 ms. */
  readonly reservationTtlMs?: number
  readonly replicas?: number
  readonly onWarning: (message: string, err: unknown) => void
}

type Entry =
  | { readonly s: 'pending'; readonly until: number }
  /** `at`: when the signal was first accepted (ms), from which the window runs. */
  | { readonly s: 'accepted'; readonly signal: AcceptedSignal; readonly at: number }

interface Found {
  readonly name: string
  readonly seq: number
  readonly entry: Entry | null
}

const POLL_MS = 10

/**
 * The signal index in JetStream, shared by every gateway. Each id of a source (its
 * signal ids and Idempotency-Keys, one namespace) is one subject holding one entry:
 * `pending` while a new signal's request holds the reservation, then `accepted` with
 * what a retry's 202 repeats (body SHA-256, received_at, test flag).
 *
 * - A reservation is a create-if-absent (`expect.lastSubjectSequence: 0`, or the seq of
 *   an entry the check found stale): of concurrent checks on any gateways one wins, the
 *   others see `in_flight` and poll the subject until it changes. Completing writes the
 *   accepted entry under the pending entry's seq; releasing without an accept deletes it.
 *   A pending entry whose gateway died frees its ids after `reservationTtlMs`.
 * - A replay that brings a new Idempotency-Key binds it with a create-if-absent.
 * - The window runs from the first accept: within it, same body replays, another body
 *   conflicts; past it a signal id is `reused` while the stream keeps it (`retainMs`,
 *   the max_age), and an Idempotency-Key is free again. Past `retainMs` the id is
 *   forgotten by the index; the log's msgID window is then the only guard.
 *
 * Memory (nats-server 2.9.10 measured ~190 B per live subject): one subject per accepted
 * signal, two with an Idempotency-Key, for `retainMs`. At R accepted signals per second
 * the servers hold ~190 B × R × retainMs/1000 (× 2 with keys): ~342 KB per accepted
 * signal per second for a 30-minute retention, 5.5 GB at 16,000/s. The index never
 * takes a msgID duplicate window (~230 B per id, all on one stream's servers). Sources
 * are spread over `partitions` streams by a hash of the source id; placed on different
 * servers (stream placement), each server holds 1/partitions of it (× replicas copies
 * spread the same way). Messages themselves (~150 B) are on disk.
 */
export class NatsSignalIndex implements SignalIndex {
  readonly #js: JetStreamClient
  readonly #jsm: JetStreamManager
  readonly #o: NatsSignalIndexOptions
  #reservations = 0

  private constructor(js: JetStreamClient, jsm: JetStreamManager, o: NatsSignalIndexOptions) {
    this.#js = js
    this.#jsm = jsm
    this.#o = o
  }

  static async open(o: NatsSignalIndexOptions): Promise<NatsSignalIndex> {
    checkNames(o.stream, o.subjectPrefix)
    if (!(o.retainMs >= o.dedupWindowMs)) throw stateError('opening the signal index', new Error('retainMs must be at least dedupWindowMs'))
    let jsm: JetStreamManager | undefined
    for (let p = 0; p < o.partitions; p++) {
      jsm = await ensureStream(o.nc, {
        name: `${o.stream}_${p}`,
        subjects: [`${o.subjectPrefix}.${p}.*`],
        max_age: nanos(o.retainMs),
        max_msgs: Math.ceil(o.maxEntries / o.partitions),
        // One entry per id: the accepted entry replaces the pending one (under its seq).
        max_msgs_per_subject: 1,
        discard: DiscardPolicy.New,
        num_replicas: o.replicas ?? 1,
        duplicate_window: nanos(Math.min(o.retainMs, 1_000)),
      })
    }
    return new NatsSignalIndex(jetstream(o.nc), jsm!, o)
  }

  /** Reservations this process holds (it keeps no entries). */
  get size(): number {
    return this.#reservations
  }

  #partition(sourceId: string): number {
    return createHash('sha256').update(sourceId).digest().readUInt32BE(0) % this.#o.partitions
  }

  #where(sourceId: string, name: string): { stream: string; subject: string } {
    const p = this.#partition(sourceId)
    return { stream: `${this.#o.stream}_${p}`, subject: `${this.#o.subjectPrefix}.${p}.${subjectToken(sourceId, name)}` }
  }

  async #get(sourceId: string, name: string): Promise<Found> {
    const { stream, subject } = this.#where(sourceId, name)
    try {
      const m = await this.#jsm.streams.getMessage(stream, { last_by_subj: subject })
      return { name, seq: m?.seq ?? 0, entry: m === null ? null : m.json<Entry>() }
    } catch (err) {
      throw stateError('reading the signal index', err)
    }
  }

  /** Writes `entry` if the subject's last seq is still `seq`: 'ok', 'taken' (it moved), or 'full'. */
  async #put(sourceId: string, name: string, entry: Entry, seq: number): Promise<number | 'taken' | 'full'> {
    try {
      return (await this.#js.publish(this.#where(sourceId, name).subject, JSON.stringify(entry), { expect: { lastSubjectSequence: seq } })).seq
    } catch (err) {
      const code = apiCodeOf(err)
      if (code === STATE_API_CODE.WrongLastSequence) return 'taken'
      if (code === STATE_API_CODE.StoreFailed) return 'full'
      throw stateError('writing the signal index', err)
    }
  }

  #delete(sourceId: string, seq: number): Promise<void> {
    const { stream } = this.#where(sourceId, '')
    return this.#jsm.streams.deleteMessage(stream, seq, false).then(
      () => undefined,
      (err: unknown) => this.#o.onWarning('a released reservation was not deleted (it frees itself when it expires)', stateError('releasing a reservation', err)),
    )
  }

  /**
   * Resolves once the subject no longer holds the entry at `seq` (or that entry expired).
   * It never rejects: on a failed read it resolves, and the caller's next check meets
   * the failure itself (a waiter nobody awaits any more must not become an unhandled rejection).
   */
  async #changed(sourceId: string, name: string, seq: number, until: number): Promise<void> {
    try {
      while (Date.now() <= until) {
        await new Promise((resolve) => setTimeout(resolve, POLL_MS))
        if ((await this.#get(sourceId, name)).seq !== seq) return
      }
    } catch {
      return
    }
  }

  async check(request: SignalCheckRequest): Promise<SignalCheck> {
    const { sourceId, signalId, idempotencyKey, bodySha256, now } = request
    const names = idempotencyKey === undefined || idempotencyKey === signalId ? [signalId] : [signalId, idempotencyKey]
    const until = now + (this.#o.reservationTtlMs ?? 30_000)
    // Most signals are new: try the reservation first (one round trip), read only if it fails.
    const first = await this.#reserve(sourceId, names.map((name) => ({ name, seq: 0, entry: null })), until)
    if (first.kind === 'new' || first.kind === 'no_room') return first
    const found = await Promise.all(names.map((name) => this.#get(sourceId, name)))
    let replay: { signal: AcceptedSignal; at: number } | undefined
    let conflict = false
    const free: Found[] = []
    for (const f of found) {
      const e = f.entry
      if (e === null) free.push(f)
      else if (e.s === 'pending') {
        if (e.until > now) return { kind: 'in_flight', settled: this.#changed(sourceId, f.name, f.seq, e.until) }
        free.push(f)
      } else if (now - e.at > this.#o.dedupWindowMs) {
        // Past the window: a signal id never makes a second signal; a key is free again.
        if (f.name === signalId && e.signal.signalId === signalId) return { kind: 'reused' }
        free.push(f)
      } else if (e.signal.bodySha256 === bodySha256) replay = e
      else conflict = true
    }
    if (conflict) return { kind: 'conflict' }
    if (replay !== undefined) {
      // The request's key, new to the index, is bound to the signal it replays.
      for (const f of free) {
        const put = await this.#put(sourceId, f.name, { s: 'accepted', signal: replay.signal, at: replay.at }, f.seq)
        if (put === 'full') return { kind: 'no_room', room: 'store_full' }
        if (put === 'taken') return this.check(request)
      }
      return { kind: 'replay', signal: replay.signal }
    }
    return this.#reserve(sourceId, free, until)
  }

  /** Pending entries on every one of `free` (under the seq each was found at), or none of them. */
  async #reserve(sourceId: string, free: readonly Found[], until: number): Promise<SignalCheck> {
    const puts = await Promise.all(free.map((f) => this.#put(sourceId, f.name, { s: 'pending', until }, f.seq)))
    const held = puts.map((p, i) => ({ name: free[i]!.name, seq: p })).filter((h): h is { name: string; seq: number } => typeof h.seq === 'number')
    if (held.length < free.length) {
      await Promise.all(held.map((h) => this.#delete(sourceId, h.seq)))
      if (puts.includes('full')) return { kind: 'no_room', room: 'store_full' }
      const lost = free[puts.findIndex((p) => p === 'taken')]!
      return { kind: 'in_flight', settled: this.#changed(sourceId, lost.name, lost.seq, until) }
    }
    return { kind: 'new', reservation: this.#reservation(sourceId, held) }
  }

  #reservation(sourceId: string, held: readonly { name: string; seq: number }[]): SignalReservation {
    this.#reservations++
    let ended = false
    let accepted = false
    return {
      takeRoom: async () => 'ok',
      accepted: async (signal, _appended, now) => {
        const puts = await Promise.all(held.map((h) => this.#put(sourceId, h.name, { s: 'accepted', signal, at: now }, h.seq)))
        // 'taken': the reservation expired and another took the id over; the log's msgID stays the last word.
        accepted = puts.some((p) => typeof p === 'number')
      },
      appendRefused: () => undefined,
      release: () => {
        if (ended) return
        ended = true
        this.#reservations--
        if (!accepted) for (const h of held) void this.#delete(sourceId, h.seq)
      },
    }
  }

  /**
   * Writes an entry for a signal another log accepted at `acceptedAtMs` (an embedded
   * deployment moved into the cluster) under each of `names`, create-if-absent: the window
   * and the `reused` answer then run from that first accept, as if this index had taken
   * it. True when at least one entry was written; false when all were there already.
   */
  async carryOver(sourceId: string, names: readonly string[], signal: AcceptedSignal, acceptedAtMs: number): Promise<boolean> {
    const entry: Entry = { s: 'accepted', signal, at: acceptedAtMs }
    const puts = await Promise.all(names.map((name) => this.#put(sourceId, name, entry, 0)))
    if (puts.includes('full')) throw stateError('carrying a signal over', new Error(`the signal index holds all it may (SIGNAL_ID_HISTORY_MAX)`))
    return puts.some((p) => typeof p === 'number')
  }

  /** The index here is its own streams, one subject per signal: a record that is no signal adds nothing. */
  logged(): void {}

  async hasAccepted(sourceId: string, signalId: string): Promise<boolean> {
    const { entry } = await this.#get(sourceId, signalId)
    return entry?.s === 'accepted' && entry.signal.signalId === signalId
  }
}
