/**
 * Behaviour every SignalIndex adapter (pipeline/ingest/ports.ts) must show, run against
 * the embedded adapter now and the NATS one later. Backend-agnostic: only the port.
 *
 * `open` gives two views of one fresh backend, as two gateway processes see it (one
 * adapter may give the same object twice), whose dedup window is `dedupWindowMs`.
 */
import { createHash } from 'node:crypto'
import type { AcceptedSignal, SignalCheck, SignalCheckRequest, SignalIndex, SignalReservation } from '../../pipeline/index.js'
import type { TapTest } from './kv-contract.js'

export type OpenSignalIndex = (t: TapTest, options: { readonly dedupWindowMs: number }) => Promise<{ readonly a: SignalIndex; readonly b: SignalIndex }>

const WINDOW_MS = 300
const sha = (body: string) => createHash('sha256').update(body).digest('hex')
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Ask {
  readonly sourceId?: string
  readonly signalId: string
  readonly idempotencyKey?: string
  readonly body?: string
}

const request = (ask: Ask): SignalCheckRequest => ({
  sourceId: ask.sourceId ?? 'src_1',
  signalId: ask.signalId,
  idempotencyKey: ask.idempotencyKey,
  bodySha256: sha(ask.body ?? `body of ${ask.signalId}`),
  now: Date.now(),
  keyId: 'key_1',
  claimedNonce: undefined,
  receivedAtMs: Date.now(),
})

function reservationOf(t: TapTest, check: SignalCheck): SignalReservation {
  if (check.kind !== 'new') throw new Error(`expected a new signal, got ${check.kind}`)
  t.pass('new: the request holds the reservation')
  return check.reservation
}

/** Each backend numbers its log records: the seq an append would have given. */
function appender() {
  let seq = 0
  return async (reservation: SignalReservation, ask: Ask, receivedAtMs = Date.now(), test = false): Promise<AcceptedSignal> => {
    const signal: AcceptedSignal = { bodySha256: sha(ask.body ?? `body of ${ask.signalId}`), signalId: ask.signalId, receivedAtMs, test }
    if ((await reservation.takeRoom(Date.now())) !== 'ok') throw new Error('no room in an empty index')
    await reservation.accepted(signal, { seq: ++seq, duplicate: false }, Date.now())
    reservation.release()
    return signal
  }
}

export function signalIndexContract(t: TapTest, name: string, open: OpenSignalIndex): void {
  t.test(`${name}: signal index contract`, async (t) => {
    t.test('an accepted signal sent again with the same body, through another gateway, replays the first accept', async (t) => {
      const { a, b } = await open(t, { dedupWindowMs: 60_000 })
      const accept = appender()
      const ask = { signalId: 'sig_00000001' }
      const first = await accept(reservationOf(t, await a.check(request(ask))), ask, 1_700_000_000_123, true)
      t.same(await b.check(request(ask)), { kind: 'replay', signal: first }, 'with its received_at and test flag')
      t.equal(await b.hasAccepted('src_1', 'sig_00000001'), true)
      t.equal(await a.hasAccepted('src_1', 'sig_00000002'), false)
    })

    t.test('the same signal_id with another body is a conflict', async (t) => {
      const { a, b } = await open(t, { dedupWindowMs: 60_000 })
      const accept = appender()
      await accept(reservationOf(t, await a.check(request({ signalId: 'sig_00000001' }))), { signalId: 'sig_00000001' })
      t.same(await b.check(request({ signalId: 'sig_00000001', body: 'another body' })), { kind: 'conflict' })
    })

    t.test('signal ids and Idempotency-Keys are one namespace per source, compared by the body', async (t) => {
      const { a, b } = await open(t, { dedupWindowMs: 60_000 })
      const accept = appender()
      const ask = { signalId: 'sig_00000001', idempotencyKey: 'idem_0000001' }
      const first = await accept(reservationOf(t, await a.check(request(ask))), ask)
      t.same(await b.check(request(ask)), { kind: 'replay', signal: first }, 'the same request again')
      t.same(await b.check(request({ signalId: 'sig_00000002', idempotencyKey: 'idem_0000001', body: 'another body' })), { kind: 'conflict' }, 'the key under another signal')
      t.same(await b.check(request({ signalId: 'idem_0000001', body: 'another body' })), { kind: 'conflict' }, 'the key as a signal id')
      t.same(await a.check(request({ signalId: 'sig_00000003', idempotencyKey: 'sig_00000001', body: 'another body' })), { kind: 'conflict' }, 'a signal id as a key')
      reservationOf(t, await a.check(request({ sourceId: 'src_2', signalId: 'sig_00000001', idempotencyKey: 'idem_0000001', body: 'another body' }))).release()
    })

    t.test('a replay that brings an Idempotency-Key new to the index binds it to the signal', async (t) => {
      const { a, b } = await open(t, { dedupWindowMs: 60_000 })
      const accept = appender()
      const first = await accept(reservationOf(t, await a.check(request({ signalId: 'sig_00000001' }))), { signalId: 'sig_00000001' })
      t.same(await a.check(request({ signalId: 'sig_00000001', idempotencyKey: 'idem_late_01' })), { kind: 'replay', signal: first })
      t.same(await b.check(request({ signalId: 'sig_00000002', idempotencyKey: 'idem_late_01', body: 'another body' })), { kind: 'conflict' })
      t.same(await b.check(request({ signalId: 'sig_00000001', idempotencyKey: 'idem_late_01' })), { kind: 'replay', signal: first })
    })

    t.test('while a new signal holds its reservation, a check of its ids on another gateway waits for it', async (t) => {
      const { a, b } = await open(t, { dedupWindowMs: 60_000 })
      const accept = appender()
      const ask = { signalId: 'sig_00000001', idempotencyKey: 'idem_0000001' }
      const reservation = reservationOf(t, await a.check(request(ask)))
      for (const other of [ask, { signalId: 'sig_00000002', idempotencyKey: 'idem_0000001' }, { signalId: 'idem_0000001' }]) {
        const waiting = await b.check(request(other))
        t.equal(waiting.kind, 'in_flight', `${other.signalId} waits`)
      }
      const waiting = await b.check(request(ask))
      if (waiting.kind !== 'in_flight') throw new Error('expected in_flight')
      const first = await accept(reservation, ask)
      await waiting.settled
      t.same(await b.check(request(ask)), { kind: 'replay', signal: first }, 'and then replays the accept')
    })

    t.test('a reservation released without an accept leaves the ids free, and releasing twice is harmless', async (t) => {
      const { a, b } = await open(t, { dedupWindowMs: 60_000 })
      const reservation = reservationOf(t, await a.check(request({ signalId: 'sig_00000001' })))
      const waiting = await b.check(request({ signalId: 'sig_00000001' }))
      reservation.appendRefused()
      reservation.release()
      reservation.release()
      if (waiting.kind === 'in_flight') await waiting.settled
      reservationOf(t, await b.check(request({ signalId: 'sig_00000001' }))).release()
    })

    t.test('of many checks of one new signal made at once on two gateways, exactly one gets the reservation', async (t) => {
      const { a, b } = await open(t, { dedupWindowMs: 60_000 })
      const checks = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? a : b).check(request({ signalId: 'sig_race_0001' }))))
      const kinds = checks.map((c) => c.kind).sort()
      t.same(kinds, ['in_flight', ...Array(14).fill('in_flight'), 'new'].sort())
      for (const c of checks) if (c.kind === 'new') c.reservation.release()
    })

    t.test('past the dedup window a signal id accepted before is reused, never new, with any body', async (t) => {
      const { a, b } = await open(t, { dedupWindowMs: WINDOW_MS })
      const accept = appender()
      await accept(reservationOf(t, await a.check(request({ signalId: 'sig_00000001' }))), { signalId: 'sig_00000001' })
      await sleep(WINDOW_MS + 100)
      t.same(await b.check(request({ signalId: 'sig_00000001' })), { kind: 'reused' }, 'the same body')
      t.same(await b.check(request({ signalId: 'sig_00000001', body: 'another body' })), { kind: 'reused' }, 'another body')
      t.equal(await b.hasAccepted('src_1', 'sig_00000001'), true, 'and it is still known as accepted')
    })
  })
}
