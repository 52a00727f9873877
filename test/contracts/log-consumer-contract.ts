/**
 * The consumer half of the signal log contract (./log-contract.ts runs it): durable
 * consumers as JetStream pull consumers with AckPolicy.All. Backend-agnostic: what it
 * needs beyond the contract (removing old records as retention would, making the
 * backend unreachable) comes in through `BackendHooks`.
 */
import type { FetchResult, LogConsumer, SignalLog } from '../../pipeline/log.js'
import { appendMany, fresh } from './log-contract.js'
import type { MakeLog, TapTest } from './log-contract.js'

export interface BackendHooks {
  /**
   * Removes records before `beforeSeq` as retention would: at least the first record and
   * never the last; a backend that removes whole blocks may keep some before `beforeSeq`
   * (the tests read `info().firstSeq` for what went).
   */
  expire(log: SignalLog, beforeSeq: number): Promise<void>
  /** Makes the backend unreachable for reads and acks until the returned function is called. */
  makeUnavailable(log: SignalLog): Promise<() => Promise<void>>
}

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)
const seqsOf = (r: FetchResult): number[] => r.records.map((x) => x.seq)

/** Records of about 200 bytes, so a few dozen span several blocks of any backend. */
async function appendSized(log: SignalLog, from: number, to: number, sourceId?: string): Promise<void> {
  for (let i = from; i <= to; i++) {
    await log.append(`s-${i}`, bytes(`payload ${i} `.padEnd(200, '.')), sourceId === undefined ? undefined : { sourceId })
  }
}

export function consumerContract(t: TapTest, name: string, makeLog: MakeLog, hooks: BackendHooks): void {
  t.test(`${name}: signal log consumer contract`, async (t) => {
    t.test('info is asynchronous and reports the log', async (t) => {
      const { log } = await fresh(t, makeLog)
      const pending = log.info()
      t.ok(pending instanceof Promise, 'info returns a promise')
      t.match(await pending, { firstSeq: 0, lastSeq: 0, records: 0 })
      await appendMany(log, 3)
      t.match(await log.info(), { firstSeq: 1, lastSeq: 3, records: 3 })
    })

    t.test('records carry the source they were appended for; a bad source id is refused', async (t) => {
      const { log, reopen } = await fresh(t, makeLog)
      await log.append('a-1', bytes('a'), { sourceId: 'src_A-1' })
      await log.append('n-1', bytes('n'))
      await t.rejects(log.append('x', bytes('x'), { sourceId: 'has.dot' }), { code: 'invalid_argument' })
      await t.rejects(log.append('x', bytes('x'), { sourceId: '' }), { code: 'invalid_argument' })
      await t.rejects(log.append('x', bytes('x'), { sourceId: 'x'.repeat(129) }), { code: 'invalid_argument' })
      await t.rejects(log.append('x', bytes('x'), { subject: 's' } as never), { code: 'invalid_argument' }, 'an unknown option')
      await log.close()
      const again = await reopen()
      t.same((await again.read({ fromSeq: 1 }, 10)).map((r) => [r.seq, r.sourceId]), [[1, 'src_A-1'], [2, '']])
    })

    t.test('a new consumer is handed every record in order, from position 0', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 5)
      const c = await log.consumer('recorder')
      t.equal(c.name, 'recorder')
      t.equal(c.sourceId, null)
      t.equal(c.position(), 0)
      t.same(seqsOf(await c.fetch(3, 0)), [1, 2, 3])
      t.same(seqsOf(await c.fetch(10, 0)), [4, 5])
      t.same(await c.fetch(10, 0), { records: [], lost: null })
    })

    t.test('a waiting fetch is woken by an append, long before it expires', async (t) => {
      const { log } = await fresh(t, makeLog)
      const c = await log.consumer('waiter')
      const started = performance.now()
      const fetching = c.fetch(10, 20_000)
      await new Promise((r) => setTimeout(r, 30))
      await log.append('late', bytes('late'))
      const got = await fetching
      t.same(seqsOf(got), [1])
      t.ok(performance.now() - started < 5_000, `resolved after ${Math.round(performance.now() - started)} ms, not at the 20 s expiry`)
    })

    t.test('every waiting consumer is woken by one append', async (t) => {
      const { log } = await fresh(t, makeLog)
      const consumers = await Promise.all(Array.from({ length: 40 }, (_, i) => log.consumer(`w${i}`)))
      const fetches = consumers.map((c) => c.fetch(5, 20_000))
      await new Promise((r) => setTimeout(r, 20))
      await log.append('one', bytes('one'))
      const results = await Promise.all(fetches)
      t.ok(results.every((r) => r.records.length === 1 && r.records[0]!.dedupId === 'one'), 'each got the record')
    })

    t.test('a fetch with nothing to read resolves empty when it expires', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 1)
      const c = await log.consumer('idle')
      await c.fetch(10, 0)
      const started = performance.now()
      t.same(await c.fetch(10, 150), { records: [], lost: null })
      const waited = performance.now() - started
      t.ok(waited >= 140 && waited < 5_000, `waited ${Math.round(waited)} ms`)
    })

    t.test('an aborted fetch resolves empty at once; an already aborted one does not wait', async (t) => {
      const { log } = await fresh(t, makeLog)
      const c = await log.consumer('aborts')
      const ac = new AbortController()
      const started = performance.now()
      const fetching = c.fetch(10, 20_000, ac.signal)
      setTimeout(() => ac.abort(), 30)
      t.same(await fetching, { records: [], lost: null })
      t.ok(performance.now() - started < 5_000, 'ended by the abort')
      t.same(await c.fetch(10, 20_000, ac.signal), { records: [], lost: null })
      await log.append('after', bytes('after'))
      t.same(seqsOf(await c.fetch(10, 0)), [1], 'the aborted fetches took nothing')
    })

    t.test('closing the log ends waiting fetches; the consumer then refuses with log_closed', async (t) => {
      const { log } = await fresh(t, makeLog)
      const c = await log.consumer('closing')
      const fetching = c.fetch(10, 20_000)
      await new Promise((r) => setTimeout(r, 20))
      await log.close()
      t.same(await fetching, { records: [], lost: null })
      await t.rejects(c.fetch(1, 0), { code: 'log_closed' })
      await t.rejects(c.ack(0), { code: 'log_closed' })
    })

    t.test('a closed consumer refuses fetches, and its name can be opened again', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 2)
      const c = await log.consumer('reopen')
      await t.rejects(log.consumer('reopen'), { code: 'invalid_argument' }, 'not twice at once')
      await c.fetch(1, 0)
      await c.ack(1)
      await c.close()
      await c.close()
      await t.rejects(c.fetch(1, 0), { code: 'log_closed' })
      const again = await log.consumer('reopen')
      t.same(seqsOf(await again.fetch(10, 0)), [2])
    })

    t.test('a source filter hands out that source only, and is part of the identity', async (t) => {
      const { log } = await fresh(t, makeLog)
      for (let i = 1; i <= 30; i++) await log.append(`f-${i}`, bytes(`f ${i}`), i % 3 === 0 ? { sourceId: 'src_a' } : i % 3 === 1 ? { sourceId: 'src_b' } : undefined)
      const a = await log.consumer('only_a', { sourceId: 'src_a' })
      t.equal(a.sourceId, 'src_a')
      const got = await a.fetch(100, 0)
      t.same(seqsOf(got), [3, 6, 9, 12, 15, 18, 21, 24, 27, 30])
      t.ok(got.records.every((r) => r.sourceId === 'src_a'))
      const waiting = a.fetch(5, 20_000)
      await log.append('other', bytes('o'), { sourceId: 'src_b' })
      await log.append('mine', bytes('m'), { sourceId: 'src_a' })
      t.same((await waiting).records.map((r) => r.dedupId), ['mine'], 'another source\'s append does not end the wait')
      await a.close()
      await t.rejects(log.consumer('only_a', { sourceId: 'src_b' }), { code: 'invalid_argument' })
      await t.rejects(log.consumer('only_a'), { code: 'invalid_argument' })
      const all = await log.consumer('everything')
      await all.close()
      await t.rejects(log.consumer('everything', { sourceId: 'src_a' }), { code: 'invalid_argument' })
      t.ok(await log.consumer('only_a', { sourceId: 'src_a' }), 'the same filter opens it')
    })

    t.test('an ack is durable when it resolves: a reopened log resumes after it', async (t) => {
      const { log, reopen } = await fresh(t, makeLog)
      await appendMany(log, 8)
      const c = await log.consumer('durable', { sourceId: undefined })
      t.same(seqsOf(await c.fetch(5, 0)), [1, 2, 3, 4, 5])
      await c.ack(3)
      t.equal(c.position(), 3)
      await log.close()
      const again = await reopen()
      t.match(await again.consumerInfo('durable'), { name: 'durable', sourceId: null, ackSeq: 3 })
      const resumed = await again.consumer('durable')
      t.equal(resumed.position(), 3)
      t.same(seqsOf(await resumed.fetch(10, 0)), [4, 5, 6, 7, 8], 'unacknowledged records come again after a restart')
    })

    t.test('ack is AckAll: it covers every record up to its seq, never moves back, and not past what was handed out', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 10)
      const c = await log.consumer('ackall')
      await c.fetch(6, 0)
      await c.ack(5)
      t.equal(c.position(), 5)
      await c.ack(2)
      t.equal(c.position(), 5, 'an older ack changes nothing')
      await Promise.all([c.ack(6), c.ack(4)])
      t.equal(c.position(), 6)
      await t.rejects(c.ack(7), { code: 'invalid_argument' }, 'seq 7 was not handed out')
      for (const bad of [-1, 1.5, Number.NaN]) await t.rejects(c.ack(bad), { code: 'invalid_argument' })
      t.match(await log.consumerInfo('ackall'), { ackSeq: 6 })
      c.nak()
      t.same(seqsOf(await c.fetch(10, 0)), [7, 8, 9, 10], 'acknowledged records are not handed out again')
    })

    t.test('nak hands the records after the last ack out again', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 6)
      const c = await log.consumer('naks')
      t.same(seqsOf(await c.fetch(3, 0)), [1, 2, 3])
      c.nak()
      t.same(seqsOf(await c.fetch(3, 0)), [1, 2, 3])
      await c.ack(2)
      t.same(seqsOf(await c.fetch(2, 0)), [4, 5])
      c.nak()
      t.same(seqsOf(await c.fetch(10, 0)), [3, 4, 5, 6])
    })

    t.test('a consumer created with startSeq starts there; an existing one keeps its position', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 6)
      const c = await log.consumer('late', { startSeq: 4 })
      t.equal(c.position(), 3)
      t.same(seqsOf(await c.fetch(10, 0)), [4, 5, 6])
      await c.close()
      const again = await log.consumer('late', { startSeq: 1 })
      t.same(seqsOf(await again.fetch(10, 0)), [4, 5, 6], 'startSeq applies only when the consumer is created')
      const ahead = await log.consumer('ahead', { startSeq: 100 })
      t.equal(ahead.position(), 6, 'a start past the end is the next record appended')
      await log.append('next', bytes('n'))
      t.same(seqsOf(await ahead.fetch(10, 0)), [7])
    })

    t.test('consumers, consumerInfo and deleteConsumer give what lag metrics need', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 9)
      const a = await log.consumer('lag_a')
      await a.fetch(4, 0)
      await a.ack(4)
      const b = await log.consumer('lag_b', { sourceId: 'src_x' })
      t.same(await b.fetch(10, 0), { records: [], lost: null })
      await b.close()
      const list = await log.consumers()
      t.same(list.map((c) => [c.name, c.sourceId, c.ackSeq]).sort(), [['lag_a', null, 4], ['lag_b', 'src_x', 9]], 'a filtered consumer with nothing of its source is not behind')
      const { lastSeq } = await log.info()
      t.equal(lastSeq - (await log.consumerInfo('lag_a'))!.ackSeq, 5, 'lag in records')
      t.equal(await log.consumerInfo('nobody'), null)
      await t.rejects(log.deleteConsumer('lag_a'), { code: 'invalid_argument' }, 'an open consumer is not deleted')
      t.equal(await log.deleteConsumer('lag_b'), true)
      t.equal(await log.deleteConsumer('lag_b'), false)
      t.equal(await log.consumerInfo('lag_b'), null)
      const recreated = await log.consumer('lag_b', { sourceId: 'src_y' })
      t.equal(recreated.sourceId, 'src_y', 'a deleted name may come back with another filter')
    })

    t.test('a filtered consumer acknowledges the other sources\' records it skipped', async (t) => {
      const { log, reopen } = await fresh(t, makeLog)
      await log.append('a-1', bytes('a'), { sourceId: 'src_a' })
      await appendSized(log, 2, 40, 'src_b')
      const c = await log.consumer('quiet', { sourceId: 'src_a' })
      t.same(seqsOf(await c.fetch(10, 0)), [1])
      await c.ack(1)
      t.equal(c.position(), 40, 'nothing of src_a up to 40')
      await log.close()
      const again = await reopen()
      await hooks.expire(again, 30)
      const resumed = await again.consumer('quiet', { sourceId: 'src_a' })
      t.same(await resumed.fetch(10, 0), { records: [], lost: null }, 'no loss told for records it had skipped')
    })

    t.test('a consumer behind retention is told exactly what it lost, once, and goes on from the first record held', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendSized(log, 1, 80)
      const c = await log.consumer('behind')
      t.same(seqsOf(await c.fetch(10, 0)), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
      await c.ack(10)
      const fresher = await log.consumer('fresher')
      await fresher.fetch(50, 0)
      await fresher.ack(50)
      await hooks.expire(log, 40)
      const { firstSeq } = await log.info()
      t.ok(firstSeq > 11 && firstSeq <= 40, `records before ${firstSeq} are gone`)
      const got = await c.fetch(5, 0)
      t.same(got.lost, { fromSeq: 11, toSeq: firstSeq - 1, count: firstSeq - 11 })
      t.same(seqsOf(got), [firstSeq, firstSeq + 1, firstSeq + 2, firstSeq + 3, firstSeq + 4])
      const next = await c.fetch(5, 0)
      t.equal(next.lost, null, 'told once')
      t.same(seqsOf(next), [firstSeq + 5, firstSeq + 6, firstSeq + 7, firstSeq + 8, firstSeq + 9])
      t.equal((await fresher.fetch(100, 0)).lost, null, 'a consumer past the removed records lost nothing')
      const created = await log.consumer('created_after')
      const first = await created.fetch(1, 0)
      t.equal(first.lost, null, 'records removed before a consumer existed are no loss of its')
      t.same(seqsOf(first), [firstSeq])
    })

    t.test('a consumer that restarts behind retention is told what it lost', async (t) => {
      const { log, reopen } = await fresh(t, makeLog)
      await appendSized(log, 1, 80)
      const c = await log.consumer('restarts', { sourceId: 'src_none' })
      await c.close()
      const d = await log.consumer('restarts_all')
      await d.fetch(5, 0)
      await d.ack(5)
      await log.close()
      const again = await reopen()
      await hooks.expire(again, 60)
      const { firstSeq } = await again.info()
      const resumed = await again.consumer('restarts_all')
      const got = await resumed.fetch(1, 0)
      t.same(got.lost, { fromSeq: 6, toSeq: firstSeq - 1, count: firstSeq - 6 })
      t.same(seqsOf(got), [firstSeq])
      // A filtered consumer's loss counts records of every source: what they were is gone.
      const filtered = await again.consumer('restarts', { sourceId: 'src_none' })
      t.same((await filtered.fetch(1, 0)).lost, { fromSeq: 1, toSeq: firstSeq - 1, count: firstSeq - 1 })
    })

    t.test('consume() yields batches as they come and ends on abort', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 5)
      const c = await log.consumer('iterates')
      const ac = new AbortController()
      const seen: number[] = []
      const loop = (async () => {
        for await (const batch of c.consume({ max: 2, expiresMs: 50, signal: ac.signal })) {
          seen.push(...seqsOf(batch))
          await c.ack(batch.records.at(-1)!.seq)
          if (seen.length === 7) ac.abort()
        }
      })()
      await new Promise((r) => setTimeout(r, 30))
      await appendMany(log, 2, 'more')
      await loop
      t.same(seen, [1, 2, 3, 4, 5, 6, 7])
      t.equal(c.position(), 7)
    })

    t.test('an unreachable backend is unavailable (transient), unlike a closed log, and serves again after', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 4)
      const c = await log.consumer('flaky')
      await c.fetch(2, 0)
      const restore = await hooks.makeUnavailable(log)
      try {
        await t.rejects(c.fetch(2, 0), { code: 'unavailable', name: 'LogError' })
        await t.rejects(log.read({ fromSeq: 1 }, 2), { code: 'unavailable' })
        await t.rejects(c.ack(2), { code: 'unavailable' })
      } finally {
        await restore()
      }
      t.equal(c.position(), 0, 'the failed ack stored nothing')
      await c.ack(2)
      t.equal(c.position(), 2)
      t.same(seqsOf(await c.fetch(10, 0)), [3, 4], 'the failed fetch handed nothing out')
      t.same((await log.append('after', bytes('a'))).seq, 5, 'the log was not failed by it')
      await log.close()
      await t.rejects(c.fetch(1, 0), { code: 'log_closed' })
    })

    t.test('invalid consumer arguments are refused with invalid_argument', async (t) => {
      const { log } = await fresh(t, makeLog)
      for (const bad of ['', 'has space', 'dot.name', 'x'.repeat(65), 'ünï']) {
        await t.rejects(log.consumer(bad), { code: 'invalid_argument' }, `consumer(${JSON.stringify(bad)})`)
        await t.rejects(log.consumerInfo(bad), { code: 'invalid_argument' })
      }
      await t.rejects(log.consumer('c', { sourceId: 'a b' }), { code: 'invalid_argument' })
      await t.rejects(log.consumer('c', { startSeq: 0 }), { code: 'invalid_argument' })
      await t.rejects(log.consumer('c', { filter: 'x' } as never), { code: 'invalid_argument' })
      const c: LogConsumer = await log.consumer('c')
      for (const [max, expires] of [[0, 0], [4097, 0], [1.5, 0], [1, -1], [1, 3_600_001], [1, Number.NaN]] as const) {
        await t.rejects(c.fetch(max, expires), { code: 'invalid_argument' }, `fetch(${max}, ${expires})`)
      }
      t.same(await c.fetch(4096, 0), { records: [], lost: null }, 'the largest batch is allowed')
    })
  })
}
