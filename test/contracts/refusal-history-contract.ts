/**
 * Behaviour every RefusalHistory adapter (pipeline/ingest/ports.ts) must show, run
 * against the embedded adapter now and the NATS one later. Backend-agnostic: only the port.
 *
 * `open` gives two views of one fresh backend, as two gateway processes see it (one
 * adapter may give the same object twice), keeping at least `perSource` refusals of each
 * kind (signature verified or not) per source.
 */
import type { IngestErrorRecord, RefusalHistory } from '../../pipeline/index.js'
import type { TapTest } from './kv-contract.js'

export type OpenRefusalHistory = (t: TapTest, options: { readonly perSource: number }) => Promise<{ readonly a: RefusalHistory; readonly b: RefusalHistory }>

const refusal = (n: number, code: IngestErrorRecord['code'] = 'invalid_signature'): IngestErrorRecord => ({
  request_id: `req_${String(n).padStart(6, '0')}`,
  time: new Date(1_700_000_000_000 + n).toISOString(),
  status: code === 'invalid_signature' ? 401 : 400,
  code,
  key_id: 'key_1',
  signal_id: null,
  client_address: '203.0.113.7',
})

/** Every record of the source, page after page, newest first. */
async function listAll(history: RefusalHistory, sourceId: string, limit: number): Promise<string[]> {
  const ids: string[] = []
  let cursor: string | undefined
  for (let pages = 0; pages < 1000; pages++) {
    const page = await history.page(sourceId, limit, cursor)
    if (page === undefined) throw new Error('a cursor the history gave was refused')
    ids.push(...page.items.map((r) => r.request_id))
    if (page.nextCursor === null) return ids
    cursor = page.nextCursor
  }
  throw new Error('the pages never end')
}

/** Records are kept behind the answer: waits until the source lists `count` of them. */
async function listed(history: RefusalHistory, sourceId: string, count: number): Promise<string[]> {
  const deadline = Date.now() + 5000
  for (;;) {
    const ids = await listAll(history, sourceId, 1000)
    if (ids.length >= count || Date.now() > deadline) return ids
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

export function refusalHistoryContract(t: TapTest, name: string, open: OpenRefusalHistory): void {
  t.test(`${name}: refusal history contract`, async (t) => {
    t.test('refusals recorded on one gateway are listed on another, newest first, for their own source only', async (t) => {
      const { a, b } = await open(t, { perSource: 100 })
      for (let n = 1; n <= 3; n++) a.record('src_1', refusal(n))
      a.record('src_2', refusal(4))
      t.same(await listed(b, 'src_1', 3), ['req_000003', 'req_000002', 'req_000001'])
      t.same(await listed(b, 'src_2', 1), ['req_000004'])
      t.same(await b.page('src_unknown', 10, undefined), { items: [], nextCursor: null }, 'a source without refusals lists none')
      const [first] = (await b.page('src_1', 1, undefined))?.items ?? []
      t.same(first, refusal(3), 'each record as it was recorded')
    })

    t.test('pages follow each other by cursor: every refusal once, newest first', async (t) => {
      const { a, b } = await open(t, { perSource: 100 })
      for (let n = 1; n <= 25; n++) a.record('src_1', refusal(n), n % 2 === 0 ? `nonce-${n}` : undefined)
      const all = await listed(b, 'src_1', 25)
      t.same(all, Array.from({ length: 25 }, (_, i) => refusal(25 - i).request_id), 'verified and unverified refusals merged by age')
      t.same(await listAll(b, 'src_1', 4), all, 'the same in pages of 4')
    })

    t.test("a cursor is the source's own: the same whatever other sources were refused before and between its records", async (t) => {
      const alone = await open(t, { perSource: 100 })
      const crowded = await open(t, { perSource: 100 })
      for (let n = 1; n <= 3; n++) {
        alone.a.record('src_1', refusal(n))
        for (let m = 0; m < 5; m++) crowded.a.record('src_2', refusal(100 + n * 10 + m))
        crowded.a.record('src_1', refusal(n))
      }
      await listed(alone.b, 'src_1', 3)
      await listed(crowded.b, 'src_1', 3)
      const cursorOf = async (history: RefusalHistory) => (await history.page('src_1', 2, undefined))?.nextCursor
      const cursor = await cursorOf(alone.b)
      t.type(cursor, 'string', 'a second page')
      t.equal(await cursorOf(crowded.b), cursor, 'the other source\'s 15 refusals change nothing in it')
      t.same((await crowded.b.page('src_1', 2, cursor!))?.items.map((r) => r.request_id), ['req_000001'], 'and it leads to the rest')
    })

    t.test('a cursor the history never gave is refused', async (t) => {
      const { b } = await open(t, { perSource: 100 })
      for (const cursor of ['not a cursor', Buffer.from('-1').toString('base64url'), Buffer.from('1e9').toString('base64url')]) {
        t.equal(await b.page('src_1', 10, cursor), undefined, cursor)
      }
    })

    t.test("unsigned junk naming a source never pushes out the creator's own (verified) refusals", async (t) => {
      const perSource = 10
      const { a, b } = await open(t, { perSource })
      for (let n = 1; n <= perSource; n++) a.record('src_1', refusal(n, 'invalid_severity'), `nonce-${n}`)
      for (let n = perSource + 1; n <= perSource * 5; n++) b.record('src_1', refusal(n))
      const ids = await listed(a, 'src_1', perSource * 2)
      const verified = Array.from({ length: perSource }, (_, i) => refusal(i + 1).request_id)
      t.same(ids.filter((id) => verified.includes(id)).sort(), verified, 'every verified refusal is still listed')
    })
  })
}
