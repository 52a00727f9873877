import { readFileSync } from 'node:fs'
import t from 'tap'
import { verifyEd25519 } from '../../pipeline/verify/ed25519.js'
import { repoPath } from '../helpers/repo-root.js'

interface WycheproofTest {
  tcId: number
  comment: string
  flags: string[]
  msg: string
  sig: string
  result: 'valid' | 'invalid' | 'acceptable'
}
interface WycheproofFile {
  numberOfTests: number
  testGroups: { publicKey: { pk: string }; tests: WycheproofTest[] }[]
}

const file = JSON.parse(
  readFileSync(repoPath('test/fixtures/wycheproof-ed25519_test.json'), 'utf8'),
) as WycheproofFile
const hex = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s, 'hex'))

t.test('every Wycheproof Ed25519 vector gets its expected result', async (t) => {
  let count = 0
  for (const group of file.testGroups) {
    const publicKey = hex(group.publicKey.pk)
    for (const v of group.tests) {
      count++
      // Plain Uint8Arrays (not Buffers) are what the worker receives from the pool.
      const got = verifyEd25519(publicKey, hex(v.msg), hex(v.sig))
      t.equal(got, v.result === 'valid', `tcId ${v.tcId} (${v.flags.join(', ')}) ${v.comment}`)
    }
  }
  t.equal(count, 151, 'all 151 vectors ran')
  t.equal(file.numberOfTests, 151)
})

t.test('a valid signature with a byte appended is refused, not truncated', async (t) => {
  // sodium-native itself accepts this (it reads only the first 64 bytes).
  const group = file.testGroups[0]!
  const v = group.tests[0]!
  const sig = hex(v.sig)
  t.equal(verifyEd25519(hex(group.publicKey.pk), hex(v.msg), sig), true)
  const padded = new Uint8Array(65)
  padded.set(sig)
  t.equal(verifyEd25519(hex(group.publicKey.pk), hex(v.msg), padded), false)
})

t.test('wrong key and signature lengths return false without throwing', async (t) => {
  const msg = new Uint8Array(10)
  t.equal(verifyEd25519(new Uint8Array(31), msg, new Uint8Array(64)), false)
  t.equal(verifyEd25519(new Uint8Array(33), msg, new Uint8Array(64)), false)
  t.equal(verifyEd25519(new Uint8Array(32), msg, new Uint8Array(0)), false)
  t.equal(verifyEd25519(new Uint8Array(32), msg, new Uint8Array(63)), false)
})
