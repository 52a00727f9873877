// test/gateway/control-plane.test.ts with its gateways on NATS (test/helpers/test-backend.ts).
import t from 'tap'
import { natsServersStarted } from '../helpers/test-backend.js'

process.env['SGW_TEST_BACKEND'] = 'nats'
await import('../gateway/control-plane.test.js')
// Queued after the suite's own subtests, so it runs once they have started their gateways.
t.test('the suite ran its gateways on NATS', async (t) => t.ok(natsServersStarted() > 0))
