import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { checkpointText, signNote, verifierKey } from '../../receipt-log/index.js'
import { receiptIdOf } from '../../receipts/index.js'
import { payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { sgwRunner } from '../helpers/sgw-process.js'
import { until } from '../helpers/wait-until.js'

/**
 * `sgw receipts proof`, `sgw verify-receipt` and `sgw log monitor` against one started
 * gateway: a real receipt's bundle verifies, a tampered one or a wrong log key is refused
 * with exit 4 and the check that failed, and the monitor follows checkpoints across runs
 * through its state file and reports a fork with both checkpoints.
 */

const gw = await startTestGateway(t, { env: { RECEIPT_LOG_CHECKPOINT_MS: '200', RECORDER_FLUSH_MS: '50' } })
const dir = mkdtempSync(join(tmpdir(), 'sgw-log-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const sgw = sgwRunner(gw.url, dir)
const src = await provision(gw)

async function pushOne(): Promise<string> {
  const p = payload(src.sourceId)
  const res = await push(gw, src.sign(p))
  if (res.status !== 202) throw new Error(`push answered ${res.status}`)
  return receiptIdOf(src.sourceId, p.signal_id as string)
}

const checkpointSize = async () => {
  const res = await fetch(`${gw.url}/v1/log/checkpoint`)
  return res.status === 200 ? Number((await res.text()).split('\n')[1]) : 0
}

/** A key that is not the log's, named after the log's origin, and a checkpoint it signs. */
function forger(origin: string) {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url')
  return {
    key: verifierKey(origin, raw),
    sign: (size: number) => signNote(checkpointText(origin, size, randomBytes(32)), [{ name: origin, publicKey: raw, privateKey }]),
  }
}

const receiptId = await pushOne()

t.test('receipts proof waits for the leaf to be in a checkpoint and writes the bundle', async (t) => {
  const run = await sgw(['receipts', 'proof', receiptId, '-o', 'bundle.json', '--wait', '30', '--json'], { token: src.creatorToken })
  t.equal(run.code, 0, run.stderr)
  t.match(run.json(), { file: 'bundle.json', receipt_id: receiptId, whole: true })
  t.match(JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8')), { leaf_index: Number, request: { key_id: src.keyId } })
})

let firstSize = 0

t.test('log monitor --once: the first checkpoint remembered, then a larger one consistent with it, across runs through the state file', async (t) => {
  const first = await sgw(['log', 'monitor', '--once', '--state', 'state.json', '--json'])
  t.equal(first.code, 0, first.stderr)
  t.match(first.stderr, /trusting the log key the gateway names: /)
  t.match(first.json(), { outcome: 'first', size: Number })
  firstSize = first.json().size
  await pushOne()
  await until(async () => (await checkpointSize()) > firstSize, 20_000, 'a larger checkpoint')
  const second = await sgw(['log', 'monitor', '--once', '--state', 'state.json', '--json'])
  t.equal(second.code, 0, second.stderr)
  t.match(second.json(), { outcome: 'grew', previous_size: firstSize })
  t.ok(second.json().size > firstSize)
  t.equal(JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')).checkpoint.split('\n')[1], String(second.json().size), 'the state holds the latest verified')
})

t.test('verify-receipt: the bundle verifies with the key of /v1/log/key, and is consistent with the monitor\'s later checkpoint', async (t) => {
  const run = await sgw(['verify-receipt', 'bundle.json', '--checkpoint', 'state.json', '--json'])
  t.equal(run.code, 0, run.stderr)
  const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8'))
  t.match(run.json(), { valid: true, receipt_id: receiptId, source_id: src.sourceId, creator_signed: true, key_id: src.keyId, consistent_with_size: Number(state.checkpoint.split('\n')[1]) })
})

t.test('verify-receipt refuses a tampered bundle (body_hash) and a wrong log key (checkpoint_signature) with exit 4', async (t) => {
  const bundle = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8'))
  const body = Buffer.from(bundle.request.body, 'base64').toString('utf8')
  bundle.request.body = Buffer.from(body.replace('"warning"', '"critical"')).toString('base64')
  writeFileSync(join(dir, 'tampered.json'), JSON.stringify(bundle))
  const tampered = await sgw(['verify-receipt', 'tampered.json'])
  t.equal(tampered.code, 4)
  t.match(tampered.stdout, /^not valid: body_hash: the body does not match/)
  const origin = (bundle.checkpoint as string).split('\n')[0] as string
  const wrong = await sgw(['verify-receipt', 'bundle.json', '--log-key', forger(origin).key, '--json'])
  t.equal(wrong.code, 4)
  t.match(wrong.json(), { valid: false, reason: 'checkpoint_signature' })
})

t.test('log monitor reports a fork: a remembered checkpoint of a size the log has, with another root, both printed; the state is kept', async (t) => {
  const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8'))
  const [origin, size] = (state.checkpoint as string).split('\n') as [string, string]
  // A second key the monitor trusts (a mirror's, a leaked one) signs a checkpoint of the same size with another root.
  const other = forger(origin)
  const forged = other.sign(Number(size))
  const forgedState = JSON.stringify({ checkpoint: forged, log_keys: [...state.log_keys, other.key], verified_at: state.verified_at })
  writeFileSync(join(dir, 'forked.json'), forgedState)
  const fork = await sgw(['log', 'monitor', '--once', '--state', 'forked.json'])
  t.equal(fork.code, 4, fork.stderr)
  t.match(fork.stdout, /^not consistent: consistency: /)
  t.ok(fork.stdout.includes(forged), 'the remembered checkpoint printed')
  t.match(fork.stdout, new RegExp(`the checkpoint the gateway serves now:\\n${origin.replace(/[.]/g, '\\.')}\\n\\d+\\n`))
  t.equal(readFileSync(join(dir, 'forked.json'), 'utf8'), forgedState, 'the state file is left as it was, the evidence kept')

  // A state whose checkpoint was edited (its root changed under the log's signature) does not verify.
  const lines = (state.checkpoint as string).split('\n')
  lines[2] = randomBytes(32).toString('base64')
  writeFileSync(join(dir, 'edited.json'), JSON.stringify({ ...state, checkpoint: lines.join('\n') }))
  const edited = await sgw(['log', 'monitor', '--once', '--state', 'edited.json', '--json'])
  t.equal(edited.code, 4)
  t.match(edited.json(), { consistent: false, reason: 'checkpoint_signature', message: /edited\.json/ })
})
