// test/gateway/delivery-controls.test.ts with its gateway on NATS (test/helpers/test-backend.ts):
// the filter in the rentals bucket, retry requests through the webhooks bucket's watch and
// the v1 secrets in the webhook-secrets bucket, all on NATS KV.
import t from 'tap'
import { natsServersStarted } from '../helpers/test-backend.js'

process.env['SGW_TEST_BACKEND'] = 'nats'
await import('../gateway/delivery-controls.test.js')
// Queued after the suite's own subtests, so it runs once they have started their gateways.
t.test('the suite ran its gateway on NATS', async (t) => t.ok(natsServersStarted() > 0))
