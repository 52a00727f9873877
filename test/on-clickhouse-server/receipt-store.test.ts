// test/receipts/receipt-store.test.ts with its receipts on a ClickHouse server: the stand-in of harness/clickhouse-standin.ts (test/helpers/receipts-server.ts).
import t from 'tap'
import { standInStatements } from '../helpers/receipts-server.js'

process.env['SGW_TEST_RECEIPTS'] = 'clickhouse-server'
await import('../receipts/receipt-store.test.js')
// Queued after the suite's own subtests: its stores went over HTTP to the stand-in.
t.test('the suite ran on the ClickHouse server path', async (t) => t.ok((await standInStatements()) > 0))
