import t from 'tap'
import { nextRequestId } from '../../gateway/http/request-id.js'

t.test('request ids are random: unique, and two in a row tell nothing of how many came between', async (t) => {
  const ids = Array.from({ length: 2000 }, () => nextRequestId())
  t.equal(new Set(ids).size, ids.length, 'unique')
  t.ok(ids.every((id) => /^req_[A-Za-z0-9_-]{16}$/.test(id)), 'req_ and 16 base64url characters')
  // A counter, however encoded, shares a long prefix between neighbours; random ids share
  // on average a sixty-fourth of a character.
  let shared = 0
  for (let i = 1; i < ids.length; i++) {
    const a = ids[i - 1] as string
    const b = ids[i] as string
    let k = 4
    while (k < a.length && a[k] === b[k]) k++
    shared += k - 4
  }
  t.ok(shared / (ids.length - 1) < 0.5, `neighbours share ${(shared / (ids.length - 1)).toFixed(3)} leading characters on average`)
})
