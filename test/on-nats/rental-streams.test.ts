// test/delivery/rental-streams.test.ts with its gateways on NATS (test/helpers/test-backend.ts).
process.env['SGW_TEST_BACKEND'] = 'nats'
await import('../delivery/rental-streams.test.js')
