/**
 * Behaviour every `SignalLog` backend must show (the journal and JetStream backends
 * both run this one suite). Backend-agnostic: it only uses the contract of
 * `pipeline/log.ts` and error `code`s, never a backend's files or internals.
 *
 * Usage, in a backend's test file:
 *   logContract(t, 'journal', (dir) => openJournal({ dir, fsync: 'always', dedupWindowMs: 1_200_000 }), hooks)
 * `makeLog(dir)` must return an opened log; called again with the same `dir` it must
 * reopen the same log (for backends without local files, `dir` can key the stream name).
 * The consumer half of the suite is in ./log-consumer-contract.ts; `hooks` is what it
 * needs of the backend beyond the contract.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type tap from 'tap'
import type { LogRecord, SignalLog } from '../../pipeline/log.js'
import { consumerContract } from './log-consumer-contract.js'
import type { BackendHooks } from './log-consumer-contract.js'

/** The `t` handed to a tap subtest callback. */
export type TapTest = Parameters<Parameters<typeof tap.test>[0]>[0]

export type MakeLog = (dir: string) => Promise<SignalLog>

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)
const text = (b: Uint8Array): string => new TextDecoder().decode(b)

/** A fresh log in a fresh folder; the log is closed and the folder removed at teardown. */
export async function fresh(t: TapTest, makeLog: MakeLog): Promise<{ log: SignalLog; dir: string; reopen: () => Promise<SignalLog> }> {
  const dir = await mkdtemp(join(tmpdir(), 'signal-log-contract-'))
  const opened: SignalLog[] = []
  t.teardown(async () => {
    for (const l of opened) await l.close()
    await rm(dir, { recursive: true, force: true })
  })
  const open = async (): Promise<SignalLog> => {
    const l = await makeLog(dir)
    opened.push(l)
    return l
  }
  return { log: await open(), dir, reopen: open }
}

export async function appendMany(log: SignalLog, n: number, prefix = 'r'): Promise<number[]> {
  const seqs: number[] = []
  for (let i = 1; i <= n; i++) seqs.push((await log.append(`${prefix}-${i}`, bytes(`${prefix} payload ${i}`))).seq)
  return seqs
}

export function logContract(t: TapTest, name: string, makeLog: MakeLog, hooks: BackendHooks): void {
  consumerContract(t, name, makeLog, hooks)
  t.test(`${name}: signal log contract`, async (t) => {
    t.test('appends get increasing seqs starting at 1', async (t) => {
      const { log } = await fresh(t, makeLog)
      t.same(await appendMany(log, 5), [1, 2, 3, 4, 5])
      t.match(await log.info(), { firstSeq: 1, lastSeq: 5, records: 5 })
    })

    t.test('concurrent appends get distinct gapless seqs in call order', async (t) => {
      const { log } = await fresh(t, makeLog)
      const results = await Promise.all(Array.from({ length: 200 }, (_, i) => log.append(`c-${i}`, bytes(`c ${i}`))))
      t.same(results.map((r) => r.seq), Array.from({ length: 200 }, (_, i) => i + 1))
      const records = await log.read({ fromSeq: 1 }, 1000)
      t.same(records.map((r) => r.dedupId), Array.from({ length: 200 }, (_, i) => `c-${i}`))
    })

    t.test('an empty log reports zeros and reads nothing', async (t) => {
      const { log } = await fresh(t, makeLog)
      t.same((await log.info()).firstSeq, 0)
      t.same((await log.info()).lastSeq, 0)
      t.same((await log.info()).records, 0)
      t.same(await log.read({ fromSeq: 1 }, 10), [])
      t.same(await log.read({ fromTime: 0 }, 10), [])
    })

    t.test('a duplicate id inside the window returns the first seq, marked duplicate, and writes nothing', async (t) => {
      const { log } = await fresh(t, makeLog)
      t.same(await log.append('sig-1', bytes('first')), { seq: 1, duplicate: false })
      t.same(await log.append('sig-2', bytes('second')), { seq: 2, duplicate: false })
      t.same(await log.append('sig-1', bytes('retry')), { seq: 1, duplicate: true })
      t.equal((await log.info()).lastSeq, 2)
      const records = await log.read({ fromSeq: 1 }, 10)
      t.equal(records.length, 2)
      t.equal(text(records[0]!.data), 'first')
    })

    t.test('concurrent appends of one id store one record', async (t) => {
      const { log } = await fresh(t, makeLog)
      const results = await Promise.all(Array.from({ length: 20 }, () => log.append('same', bytes('x'))))
      t.same(new Set(results.map((r) => r.seq)), new Set([1]))
      t.equal(results.filter((r) => !r.duplicate).length, 1)
      t.equal((await log.info()).lastSeq, 1)
    })

    t.test('read from a seq returns up to max records in order, across many records', async (t) => {
      const { log } = await fresh(t, makeLog)
      const n = 600
      // Varied sizes so records straddle any internal block or chunk boundary.
      for (let i = 1; i <= n; i++) await log.append(`m-${i}`, bytes(`m ${i} `.padEnd(10 + ((i * 37) % 900), '.')))
      for (const [from, max] of [[1, 10], [250, 100], [597, 10], [1, 1000], [0, 3]] as const) {
        const records = await log.read({ fromSeq: from }, max)
        const start = Math.max(from, 1)
        const expected = Math.min(max, n - start + 1)
        t.equal(records.length, expected, `fromSeq ${from} max ${max}: count`)
        t.same(records.map((r) => r.seq), Array.from({ length: expected }, (_, k) => start + k), `fromSeq ${from} max ${max}: seqs`)
        t.ok(records.every((r) => r.dedupId === `m-${r.seq}` && text(r.data).startsWith(`m ${r.seq} `)), `fromSeq ${from} max ${max}: contents`)
      }
      t.same(await log.read({ fromSeq: n + 1 }, 10), [], 'a start past the end reads nothing')
    })

    t.test('read from a time returns the first record at or after it', async (t) => {
      const { log } = await fresh(t, makeLog)
      for (let i = 1; i <= 300; i++) {
        await log.append(`t-${i}`, bytes(`t ${i}`))
        // Spread records over a few milliseconds so there are several distinct times.
        if (i % 50 === 0) await new Promise((r) => setTimeout(r, 3))
      }
      const all = await log.read({ fromSeq: 1 }, 1000)
      t.equal(all.length, 300)
      t.ok(all.every((r, k) => k === 0 || r.time >= all[k - 1]!.time), 'times never decrease')
      for (const pick of [0, 49, 50, 120, 299]) {
        const time = all[pick]!.time
        const firstAtOrAfter = all.find((r) => r.time >= time)!
        const records = await log.read({ fromTime: time }, 5)
        t.equal(records[0]?.seq, firstAtOrAfter.seq, `fromTime of record ${pick + 1}`)
        t.equal(records.length, Math.min(5, all.filter((r) => r.time >= time).length))
      }
      t.equal((await log.read({ fromTime: 0 }, 1))[0]?.seq, 1)
      t.same(await log.read({ fromTime: all[299]!.time + 60_000 }, 5), [])
    })

    t.test('reads include records appended after earlier reads', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 3, 'a')
      t.equal((await log.read({ fromSeq: 1 }, 10)).length, 3)
      await appendMany(log, 2, 'b')
      const records = await log.read({ fromSeq: 3 }, 10)
      t.same(records.map((r: LogRecord) => r.dedupId), ['a-3', 'b-1', 'b-2'])
    })

    t.test('records and seqs survive close and reopen', async (t) => {
      const { log, reopen } = await fresh(t, makeLog)
      await appendMany(log, 10)
      await log.close()
      const again = await reopen()
      t.match(await again.info(), { firstSeq: 1, lastSeq: 10, records: 10 })
      t.same((await again.read({ fromSeq: 1 }, 20)).map((r) => text(r.data)), Array.from({ length: 10 }, (_, i) => `r payload ${i + 1}`))
      t.same(await again.append('after', bytes('after')), { seq: 11, duplicate: false })
    })

    t.test('close waits for appends already in flight', async (t) => {
      const { log, reopen } = await fresh(t, makeLog)
      const pending = Array.from({ length: 100 }, (_, i) => log.append(`f-${i}`, bytes(`f ${i}`)))
      await log.close()
      const results = await Promise.all(pending)
      t.equal(results.length, 100)
      const again = await reopen()
      t.equal((await again.info()).lastSeq, 100)
    })

    t.test('invalid read starts are refused with invalid_argument', async (t) => {
      const { log } = await fresh(t, makeLog)
      await t.rejects(log.read({ fromSeq: -1 }, 1), { code: 'invalid_argument' })
      await t.rejects(log.read({ fromSeq: 1 }, -1), { code: 'invalid_argument' })
      await t.rejects(log.read({ fromTime: Number.NaN }, 1), { code: 'invalid_argument' })
      await t.rejects(log.read({} as { fromSeq: number }, 1), { code: 'invalid_argument' })
    })

    t.test('a record over 1 MiB is refused with record_too_large and takes no seq', async (t) => {
      const { log } = await fresh(t, makeLog)
      await t.rejects(log.append('big', new Uint8Array(1024 * 1024 + 1)), { code: 'record_too_large' })
      t.same(await log.append('small', bytes('s')), { seq: 1, duplicate: false })
    })

    t.test('closing twice is safe', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 1)
      await log.close()
      await log.close()
      t.pass('second close resolved')
    })

    t.test('append, read and ack after close reject with log_closed', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 1)
      await log.close()
      await t.rejects(log.append('late', bytes('late')), { code: 'log_closed' })
      await t.rejects(log.read({ fromSeq: 1 }, 1), { code: 'log_closed' })
      await t.rejects(log.info(), { code: 'log_closed' })
      await t.rejects(log.consumer('c'), { code: 'log_closed' })
      await t.rejects(log.sync(), { code: 'log_closed' })
    })

    t.test('sync resolves once what was acknowledged is durable, and the records read back', async (t) => {
      const { log } = await fresh(t, makeLog)
      await appendMany(log, 3)
      await log.sync()
      t.equal((await log.read({ fromSeq: 1 }, 10)).length, 3)
    })
  })
}
