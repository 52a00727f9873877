import { createPrivateKey, createPublicKey } from 'node:crypto'
import t from 'tap'
import { checkpointText, formatTilePath, parseTilePath, signNote, verifierKey } from '../../receipt-log/index.js'
import { NoteError, openNote, parseCheckpointText, parseVerifierKey, verifyCheckpoint } from '../../sdk/index.js'

// golang.org/x/mod/sumdb/note (its package documentation and note_test.go).
const GO_VKEY = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW'
const GO_SKEY = 'PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz'
const GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
const GO_NOTE = `${GO_TEXT}\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`
// c2sp.org/signed-note, its example.
const SPEC_VKEY = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k'
const SPEC_NOTE = 'This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n'

/** The Go signer key's seed as a node:crypto key (PKCS#8 of an Ed25519 seed). */
function goPrivateKey() {
  const seed = Buffer.from(GO_SKEY.split('+').slice(4).join('+'), 'base64').subarray(1)
  return createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]), format: 'der', type: 'pkcs8' })
}

t.test('signing the Go example text with its key gives the Go note byte for byte, and its verifier key', async (t) => {
  const privateKey = goPrivateKey()
  const publicKey = Buffer.from(createPublicKey(privateKey).export({ format: 'jwk' }).x as string, 'base64url')
  t.equal(verifierKey('PeterNeumann', publicKey), GO_VKEY)
  t.equal(signNote(GO_TEXT, [{ name: 'PeterNeumann', publicKey, privateKey }]), GO_NOTE)
})

t.test('the SDK opens the Go and the C2SP example notes, and refuses them altered', async (t) => {
  t.equal(openNote(GO_NOTE, [parseVerifierKey(GO_VKEY)]).text, GO_TEXT)
  t.equal(openNote(SPEC_NOTE, [parseVerifierKey(SPEC_VKEY)]).text, 'This is an example message.\n')
  t.throws(() => openNote(GO_NOTE.replace('cryptography', 'cryptographY'), [parseVerifierKey(GO_VKEY)]), { code: 'unverified_note' })
  t.throws(() => openNote(SPEC_NOTE, [parseVerifierKey(GO_VKEY)]), { code: 'unverified_note' }, 'no signature of a known key')
  t.equal(openNote(`${SPEC_NOTE}— other.example/key AAAAAAB0ZXN0\n`, [parseVerifierKey(SPEC_VKEY)]).verifiedBy.length, 1, 'an unknown key\'s signature is passed over')
  t.throws(() => openNote('no signatures\n', [parseVerifierKey(GO_VKEY)]), NoteError)
})

t.test('a verifier key with a wrong id, algorithm or length is refused', async (t) => {
  t.throws(() => parseVerifierKey(GO_VKEY.replace('c74f20a3', 'c74f20a4')), { code: 'invalid_key' })
  t.throws(() => parseVerifierKey('PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY=='), { code: 'invalid_key' })
  t.throws(() => parseVerifierKey('PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW'), { code: 'invalid_key' })
})

t.test('a checkpoint is three lines: origin, size, base64 root; the C2SP tlog-checkpoint example parses', async (t) => {
  const example = 'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n'
  const cp = parseCheckpointText(example)
  t.equal(cp.origin, 'example.com/behind-the-sofa')
  t.equal(cp.size, 20852163)
  t.equal(Buffer.from(cp.rootHash).toString('base64'), 'CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=')
  t.equal(checkpointText(cp.origin, cp.size, cp.rootHash), example)
  t.throws(() => parseCheckpointText('o\n012\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n'), { code: 'invalid_checkpoint' }, 'a leading zero')
  const privateKey = goPrivateKey()
  const publicKey = Buffer.from(createPublicKey(privateKey).export({ format: 'jwk' }).x as string, 'base64url')
  const note = signNote(checkpointText('PeterNeumann', 5, cp.rootHash), [{ name: 'PeterNeumann', publicKey, privateKey }])
  t.equal(verifyCheckpoint(note, [parseVerifierKey(GO_VKEY)]).size, 5)
  t.throws(() => verifyCheckpoint(signNote(checkpointText('another/log', 5, cp.rootHash), [{ name: 'PeterNeumann', publicKey, privateKey }]), [parseVerifierKey(GO_VKEY)]), { code: 'unverified_note' }, 'a key named for another origin')
})

t.test('tile paths as C2SP tlog-tiles writes them', async (t) => {
  t.equal(formatTilePath({ kind: 'hash', level: 0, index: 1234067, width: 256 }), 'tile/0/x001/x234/067')
  t.equal(formatTilePath({ kind: 'entries', index: 0, width: 5 }), 'tile/entries/000.p/5')
  t.same(parseTilePath('1/x001/x234/067.p/8'), { kind: 'hash', level: 1, index: 1234067, width: 8 })
  t.same(parseTilePath('entries/005'), { kind: 'entries', index: 5, width: 256 })
  for (const bad of ['0/5', '0/x000/005', '0/005.p/256', '0/005.p/0', 'x/000', '9/000', '0/005.p/07', 'entries/'])
    t.equal(parseTilePath(bad), undefined, bad)
})
