import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { ClickHouseReceiptStore, isReceiptStoreError } from '../../receipts/index.js'

/**
 * The server path's failures become typed errors at the adapter edge. No ClickHouse server
 * can be installed on this machine, so a node:http server stands in for one (a stand-in,
 * not ClickHouse): it answers as ClickHouse's HTTP interface does when a statement fails,
 * status 500 with the exception text `Code: N. DB::Exception: ...` in the body.
 */
async function fakeClickHouse(t: { teardown(fn: () => unknown): void }, code: number, name: string): Promise<string> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(500, { 'X-ClickHouse-Exception-Code': String(code), 'Content-Type': 'text/plain' })
      res.end(`Code: ${code}. DB::Exception: stand-in failure. (${name}) (version 26.7.2.1)\n`)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const open = async (url: string) => {
  const store = new ClickHouseReceiptStore({ target: { kind: 'server', url, requestTimeoutMs: 2000 } })
  const err = await store.open().catch((e: unknown) => e)
  await store.close()
  return err
}

t.test('a server that refuses connections is unavailable: transient, worth a retry', async (t) => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  await new Promise((resolve) => server.close(resolve))
  const err = await open(`http://127.0.0.1:${port}`)
  t.ok(isReceiptStoreError(err, 'unavailable'), String(err))
  t.equal((err as { transient?: boolean }).transient, true)
})

t.test('an overloaded server (MEMORY_LIMIT_EXCEEDED, TOO_MANY_SIMULTANEOUS_QUERIES) is unavailable', async (t) => {
  t.ok(isReceiptStoreError(await open(await fakeClickHouse(t, 241, 'MEMORY_LIMIT_EXCEEDED')), 'unavailable'))
  t.ok(isReceiptStoreError(await open(await fakeClickHouse(t, 202, 'TOO_MANY_SIMULTANEOUS_QUERIES')), 'unavailable'))
})

t.test('a statement the server refuses for good (ACCESS_DENIED, a syntax error) is store_failed, not transient', async (t) => {
  const err = await open(await fakeClickHouse(t, 497, 'ACCESS_DENIED'))
  t.ok(isReceiptStoreError(err, 'store_failed'), String(err))
  t.equal((err as { transient?: boolean }).transient, false)
  t.ok(isReceiptStoreError(await open(await fakeClickHouse(t, 62, 'SYNTAX_ERROR')), 'store_failed'))
})
