import t, { type Test } from 'tap'
import { receiptIdOf } from '../../receipts/index.js'
import { decodeLeaf, merkleLeafHash, parseVerifierKey, verifyCheckpoint, verifyConsistency, verifyReceipt, type Checkpoint, type ReceiptBundle, type ReceiptLogLeaf } from '../../sdk/index.js'
import { call, payload, provision, push, type Provisioned } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'

const text = async (gw: LaunchedGateway, path: string) => {
  const res = await fetch(`${gw.url}${path}`)
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) }
}

/** Polls the proof until it is served; every earlier answer must be 409 not_yet_logged with Retry-After: 1 (or 404 while the recorder has not written the receipt). */
async function proofOf(t: Test, gw: LaunchedGateway, token: string, receiptId: string): Promise<ReceiptBundle> {
  for (const end = Date.now() + 30_000; Date.now() < end; ) {
    const res = await call(gw.url, 'GET', `/v1/byo/receipts/${receiptId}/proof`, { token })
    if (res.status === 200) return res.body.data as ReceiptBundle
    if (res.status === 409) {
      t.equal(res.body.error.code, 'not_yet_logged')
      t.equal(res.headers.get('retry-after'), '1')
    } else if (res.status !== 404) t.fail(`proof answered ${res.status} ${JSON.stringify(res.body)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`no proof for ${receiptId}`)
}

async function logKey(gw: LaunchedGateway): Promise<string> {
  return (await text(gw, '/v1/log/key')).body.toString('utf8').trim()
}

async function pushSome(src: Provisioned, gw: LaunchedGateway, n: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    const p = payload(src.sourceId)
    const res = await push(gw, src.sign(p))
    if (res.status !== 202) throw new Error(`push answered ${res.status}`)
    ids.push(receiptIdOf(src.sourceId, p.signal_id as string))
  }
  return ids
}

/** The leaves of a log of fewer than 256 entries, from its one partial entry bundle. */
async function leavesOf(gw: LaunchedGateway, size: number): Promise<ReceiptLogLeaf[]> {
  const body = (await text(gw, `/v1/log/tile/entries/000.p/${size}`)).body
  const leaves: ReceiptLogLeaf[] = []
  for (let at = 0; at < body.length; at += 2 + body.readUInt16BE(at)) leaves.push(decodeLeaf(body.subarray(at + 2, at + 2 + body.readUInt16BE(at))))
  return leaves
}

/** The first verified checkpoint of at least `size` entries. */
async function checkpointOf(gw: LaunchedGateway, size: number): Promise<Checkpoint> {
  const key = [parseVerifierKey(await logKey(gw))]
  for (const end = Date.now() + 30_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
    const cp = verifyCheckpoint((await text(gw, '/v1/log/checkpoint')).body.toString('utf8'), key)
    if (cp.size >= size) return cp
  }
  throw new Error(`no checkpoint of ${size} entries`)
}

t.test('the receipt log of a running gateway', async (t) => {
  const gw = await startTestGateway(t, { env: { RECEIPT_LOG_CHECKPOINT_MS: '200', RECORDER_FLUSH_MS: '50', PUBLIC_BASE_URL: 'https://receipts.example' } })
  const src = await provision(gw)
  const ids = await pushSome(src, gw, 5)

  await t.test('a receipt\'s whole bundle verifies with the SDK against /v1/log/key, creator signature included', async (t) => {
    const bundle = await proofOf(t, gw, src.creatorToken, ids[4]!)
    const key = await logKey(gw)
    t.match(key, /^receipts\.example\/log\+[0-9a-f]{8}\+/, 'the key is named after the origin')
    const v = verifyReceipt(bundle, { logKey: key })
    t.equal(v.creatorSigned, true)
    t.equal(v.checkpoint.origin, 'receipts.example/log')
    t.equal(v.leaf.receipt_id, ids[4])
    t.equal(bundle.request!.key_id, src.keyId)
    t.equal(bundle.request!.path, `/v1/byo/sources/${src.sourceId}/signals`)
  })

  await t.test('GET /v1/log/checkpoint is the latest signed checkpoint, as text', async (t) => {
    const res = await text(gw, '/v1/log/checkpoint')
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^text\/plain/)
    const cp = verifyCheckpoint(res.body.toString('utf8'), [parseVerifierKey(await logKey(gw))])
    t.ok(cp.size >= 5)
  })

  await t.test('entry bundles and hash tiles are served as C2SP tlog-tiles, the entries hashing to the tile\'s hashes', async (t) => {
    const cp = verifyCheckpoint((await text(gw, '/v1/log/checkpoint')).body.toString('utf8'), [parseVerifierKey(await logKey(gw))])
    const entries = await text(gw, `/v1/log/tile/entries/000.p/${cp.size}`)
    t.equal(entries.status, 200)
    t.equal(entries.headers.get('cache-control'), 'public, max-age=60', 'a partial tile is superseded')
    const hashes = await text(gw, `/v1/log/tile/0/000.p/${cp.size}`)
    t.equal(hashes.body.length, 32 * cp.size)
    const leaves: Buffer[] = []
    for (let at = 0; at < entries.body.length; ) {
      const n = entries.body.readUInt16BE(at)
      leaves.push(entries.body.subarray(at + 2, at + 2 + n))
      at += 2 + n
    }
    t.equal(leaves.length, cp.size)
    t.same(leaves.map((l) => Buffer.from(merkleLeafHash(l)).toString('hex')), Array.from({ length: cp.size }, (_, i) => hashes.body.subarray(i * 32, i * 32 + 32).toString('hex')))
    t.equal((await text(gw, `/v1/log/tile/0/000.p/${cp.size + 1}`)).status, 404, 'a tile past the checkpoint')
    t.equal((await text(gw, '/v1/log/tile/0/x000/000')).status, 404, 'a path not in canonical form')
  })

  await t.test('a consistency proof between two checkpoints verifies', async (t) => {
    const key = [parseVerifierKey(await logKey(gw))]
    const first = verifyCheckpoint((await text(gw, '/v1/log/checkpoint')).body.toString('utf8'), key)
    const more = await pushSome(src, gw, 3)
    await proofOf(t, gw, src.creatorToken, more[2]!)
    const second = verifyCheckpoint((await text(gw, '/v1/log/checkpoint')).body.toString('utf8'), key)
    const res = await call(gw.url, 'GET', `/v1/log/consistency?from=${first.size}&to=${second.size}`)
    t.equal(res.status, 200)
    const proof = (res.body.data.proof as string[]).map((h) => Buffer.from(h, 'base64'))
    t.ok(verifyConsistency(first.size, second.size, first.rootHash, second.rootHash, proof))
    t.equal((await call(gw.url, 'GET', `/v1/log/consistency?from=${second.size}&to=${first.size}`)).status, 400)
    t.equal((await call(gw.url, 'GET', `/v1/log/consistency?from=1&to=${second.size + 1000}`)).status, 400)
    t.equal((await call(gw.url, 'GET', '/v1/log/consistency?from=x&to=2')).body.error.code, 'invalid_request')
  })

  await t.test('a rotation makes checkpoints carry both keys\' signatures, and /v1/log/keys lists every key with the sizes it signed', async (t) => {
    const before = await logKey(gw)
    const rotated = await call(gw.url, 'POST', '/v1/admin/log-keys/rotate', { token: gw.adminToken })
    t.equal(rotated.status, 200)
    const after = await logKey(gw)
    t.not(after, before)
    const more = await pushSome(src, gw, 1)
    const bundle = await proofOf(t, gw, src.creatorToken, more[0]!)
    t.equal(bundle.checkpoint.split('\n— ').length - 1, 2, 'two signature lines')
    t.ok(verifyReceipt(bundle, { logKey: before }).creatorSigned, 'the old key verifies it')
    t.ok(verifyReceipt(bundle, { logKey: after }).creatorSigned, 'the new key verifies it')
    const keys = (await call(gw.url, 'GET', '/v1/log/keys')).body.data as Array<{ verifier_key: string; state: string; first_size: number | null }>
    t.same(keys.map((k) => k.state), ['retiring', 'active'])
    t.ok(keys.every((k) => k.first_size !== null && k.first_size > 0), 'each signed a checkpoint')
  })

  await t.test('an outcome that changes a receipt adds one outcome leaf in log order; posting it again adds none', async (t) => {
    const issued = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'scorer', subject: 'scoring-service' } })
    const scorer = issued.body.data.token as string
    const scoredAt = new Date(Date.now() - 60_000).toISOString()
    const item = (receiptId: string, outcome: string) => ({ receipt_id: receiptId, window_start: '2030-01-01T00:00:00.000Z', window_end: '2030-01-01T01:00:00.000Z', baseline: 0.5, outcome, scored_at: scoredAt })
    const post = async (items: unknown[]) => {
      const res = await call(gw.url, 'POST', '/v1/scoring/outcomes', { token: scorer, body: items })
      t.same(res.body.data, { accepted: items.length, refused: [] }, 'the post is stored whole')
    }
    // Every signal pushed so far is logged (each subtest waited for its last proof).
    const startCp = await checkpointOf(gw, 1)
    const start = startCp.size
    t.equal((await leavesOf(gw, start)).filter((l) => l.kind === 'outcome').length, 0, 'no outcome leaf yet')

    await post([item(ids[0]!, 'hit')])
    const first = await checkpointOf(gw, start + 1)
    t.equal(first.size, start + 1, 'the log grew by one leaf')
    t.same((await leavesOf(gw, first.size))[start], { kind: 'outcome', receipt_id: ids[0], outcome: 'hit', window_start: '2030-01-01T00:00:00.000Z', window_end: '2030-01-01T01:00:00.000Z', baseline: 0.5, scored_at: scoredAt })

    // The same post again, then a verdict on another receipt: its leaf comes after the re-post's record, so once it is there the re-post was judged.
    await post([item(ids[0]!, 'hit')])
    await post([item(ids[1]!, 'void')])
    const second = await checkpointOf(gw, start + 2)
    t.equal(second.size, start + 2, 'one more leaf, for the other receipt only')
    t.match((await leavesOf(gw, second.size))[start + 1], { kind: 'outcome', receipt_id: ids[1], outcome: 'void' }, 'the re-post added none')

    await post([item(ids[0]!, 'miss')])
    const third = await checkpointOf(gw, start + 3)
    t.equal(third.size, start + 3)
    const leaves = await leavesOf(gw, third.size)
    t.match(leaves[start + 2], { kind: 'outcome', receipt_id: ids[0], outcome: 'miss' }, 'a different verdict adds one')
    t.same(leaves.filter((l) => l.kind === 'outcome').map((l) => l.kind === 'outcome' && l.outcome), ['hit', 'void', 'miss'])

    for (const cp of [first, second]) {
      const res = await call(gw.url, 'GET', `/v1/log/consistency?from=${cp.size}&to=${third.size}`)
      const proof = (res.body.data.proof as string[]).map((h) => Buffer.from(h, 'base64'))
      t.ok(verifyConsistency(cp.size, third.size, cp.rootHash, third.rootHash, proof), `the checkpoint of ${cp.size} is a prefix of the one of ${third.size}`)
    }
    const res = await call(gw.url, 'GET', `/v1/log/consistency?from=${start}&to=${third.size}`)
    t.ok(verifyConsistency(start, third.size, startCp.rootHash, third.rootHash, (res.body.data.proof as string[]).map((h) => Buffer.from(h, 'base64'))), 'and so is the one before the outcomes')
  })

  await t.test('a receipt the reader may not see has no proof for them', async (t) => {
    const stranger = await provision(gw)
    t.equal((await call(gw.url, 'GET', `/v1/byo/receipts/${ids[0]}/proof`, { token: stranger.creatorToken })).status, 404)
    t.equal((await call(gw.url, 'GET', `/v1/byo/receipts/${ids[0]}/proof`)).status, 404, 'the public, for a source with no public receipts')
  })
})

t.test('kill -9 while signals are accepted loses no leaf of a 202\'d signal and never forks the log', async (t) => {
  const first = await startTestGateway(t, { env: { RECEIPT_LOG_CHECKPOINT_MS: '100', RECORDER_FLUSH_MS: '50' } })
  const src = await provision(first)
  const accepted: string[] = []
  const seen: string[] = []
  let stop = false
  const monitor = (async () => {
    while (!stop) {
      const res = await text(first, '/v1/log/checkpoint').catch(() => undefined)
      if (res?.status === 200) seen.push(res.body.toString('utf8'))
      await new Promise((r) => setTimeout(r, 30))
    }
  })()
  const pushers = Array.from({ length: 4 }, async () => {
    while (!stop) {
      const p = payload(src.sourceId)
      const res = await push(first, src.sign(p)).catch(() => undefined)
      if (res === undefined) return
      if (res.status === 202) accepted.push(receiptIdOf(src.sourceId, p.signal_id as string))
    }
  })
  for (const end = Date.now() + 20_000; (accepted.length < 80 || seen.length < 3) && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20))
  const key = await logKey(first)
  first.proc.kill('SIGKILL')
  stop = true
  await Promise.all([monitor, ...pushers])
  await first.exited()
  t.ok(seen.length >= 3, `${seen.length} checkpoints seen before the kill`)

  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken, env: { RECEIPT_LOG_CHECKPOINT_MS: '100', RECORDER_FLUSH_MS: '50' } })
  t.equal(await logKey(second), key, 'the log key survives')
  for (let i = 0; i < accepted.length; i += 16) {
    const bundles = await Promise.all(accepted.slice(i, i + 16).map((id) => proofOf(t, second, src.creatorToken, id)))
    for (const b of bundles) verifyReceipt(b, { logKey: key })
  }
  t.pass(`all ${accepted.length} signals 202'd before the kill have a verified proof after it`)
  const latest = verifyCheckpoint((await text(second, '/v1/log/checkpoint')).body.toString('utf8'), [parseVerifierKey(key)])
  for (const note of new Set(seen)) {
    const cp = verifyCheckpoint(note, [parseVerifierKey(key)])
    const res = await call(second.url, 'GET', `/v1/log/consistency?from=${cp.size}&to=${latest.size}`)
    const proof = (res.body.data.proof as string[]).map((h) => Buffer.from(h, 'base64'))
    if (!verifyConsistency(cp.size, latest.size, cp.rootHash, latest.rootHash, proof)) t.fail(`the checkpoint of size ${cp.size} seen before the kill is not a prefix of the one after`)
  }
  t.pass('every checkpoint seen before the kill is consistent with the latest after it')
})
