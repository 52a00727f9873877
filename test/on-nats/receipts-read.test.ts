// test/gateway/receipts-read.test.ts with its gateways on NATS (test/helpers/test-backend.ts).
process.env['SGW_TEST_BACKEND'] = 'nats'
await import('../gateway/receipts-read.test.js')
