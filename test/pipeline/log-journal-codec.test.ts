import fc from 'fast-check'
import t from 'tap'
import { crc32c } from '../../storage/index.js'
import { decodeRecord, encodeDedupId, encodeRecord, encodeSourceId, HEADER_BYTES } from '../../pipeline/journal/record-codec.js'
import { encodeRecordV1 } from '../fixtures/journal-v1.js'

t.test('CRC-32C matches the RFC 3720 and check-string vectors', async (t) => {
  const ascending = Uint8Array.from({ length: 32 }, (_, i) => i)
  const descending = Uint8Array.from({ length: 32 }, (_, i) => 31 - i)
  t.equal(crc32c(new TextEncoder().encode('123456789')), 0xe3069283)
  t.equal(crc32c(new Uint8Array(32)), 0x8a9136aa)
  t.equal(crc32c(new Uint8Array(32).fill(0xff)), 0x62a8ab43)
  t.equal(crc32c(ascending), 0x46dd794e)
  t.equal(crc32c(descending), 0x113fdb5c)
  t.equal(crc32c(new Uint8Array(0)), 0)
})

t.test('CRC-32C over a buffer equals CRC-32C continued across any split of it', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(), (bytes, at) => {
      const cut = bytes.length === 0 ? 0 : at % (bytes.length + 1)
      return crc32c(bytes, cut, bytes.length, crc32c(bytes, 0, cut)) === crc32c(bytes)
    }),
  )
  t.pass('property held')
})

const recordArb = fc.record({
  seq: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
  time: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
  id: fc.string({ maxLength: 60 }),
  source: fc.oneof(fc.constant(''), fc.stringMatching(/^[A-Za-z0-9_-]{1,128}$/)),
  data: fc.uint8Array({ maxLength: 500 }),
})

t.test('a record decodes to exactly what was encoded', async (t) => {
  fc.assert(
    fc.property(recordArb, ({ seq, time, id, source, data }) => {
      const buf = encodeRecord(seq, time, encodeDedupId(id), data, encodeSourceId(source))
      const res = decodeRecord(buf, 0, buf.length)
      return (
        res.kind === 'record' &&
        res.size === buf.length &&
        res.record.seq === seq &&
        res.record.time === time &&
        res.record.dedupId === id &&
        res.record.sourceId === source &&
        Buffer.from(res.record.data).equals(Buffer.from(data))
      )
    }),
  )
  t.pass('property held')
})

t.test('any single flipped bit makes a record fail to decode', async (t) => {
  fc.assert(
    fc.property(recordArb, fc.nat(), fc.integer({ min: 0, max: 7 }), ({ seq, time, id, source, data }, at, bit) => {
      const buf = encodeRecord(seq, time, encodeDedupId(id), data, encodeSourceId(source))
      buf[at % buf.length]! ^= 1 << bit
      return decodeRecord(buf, 0, buf.length).kind !== 'record'
    }),
  )
  t.pass('property held')
})

t.test('a record cut short decodes as incomplete, never as a record', async (t) => {
  fc.assert(
    fc.property(recordArb, fc.nat(), ({ seq, time, id, data }, at) => {
      const buf = encodeRecord(seq, time, encodeDedupId(id), data)
      const end = at % buf.length
      return decodeRecord(buf, 0, end).kind === 'incomplete'
    }),
  )
  t.pass('property held')
})

t.test('the header is 31 bytes and the length field counts the bytes after the crc', async (t) => {
  const buf = encodeRecord(7, 1_700_000_000_000, encodeDedupId('abc'), new Uint8Array([1, 2]), encodeSourceId('src_1'))
  t.equal(HEADER_BYTES, 31)
  t.equal(buf.length, HEADER_BYTES + 3 + 5 + 2)
  t.equal(buf.readUInt32LE(4), buf.length - 12)
  t.equal(buf.toString('latin1', 0, 4), 'SLJ2')
  t.equal(buf.readUInt8(30), 5, 'the source length')
  t.equal(buf.toString('latin1', HEADER_BYTES + 3, HEADER_BYTES + 8), 'src_1')
})

t.test('a record in the framing before sources (SLJ1) still decodes, with no source', async (t) => {
  fc.assert(
    fc.property(recordArb, ({ seq, time, id, data }) => {
      const buf = encodeRecordV1(seq, time, id, data)
      const res = decodeRecord(buf, 0, buf.length)
      return (
        res.kind === 'record' && res.size === buf.length && res.record.seq === seq && res.record.time === time &&
        res.record.dedupId === id && res.record.sourceId === '' && Buffer.from(res.record.data).equals(Buffer.from(data))
      )
    }),
  )
  t.pass('property held')
})

t.test('a source id that is not one subject token is refused', async (t) => {
  for (const bad of ['a.b', 'a b', '*', '>', 'x'.repeat(129), 'é']) t.throws(() => encodeSourceId(bad), { code: 'invalid_argument' }, bad)
})

t.test('an oversized record is refused with record_too_large', async (t) => {
  t.throws(() => encodeRecord(1, 0, encodeDedupId('x'), new Uint8Array(1024 * 1024)), { code: 'record_too_large' })
})
