// test/gateway/ingest-validation.test.ts with its gateways on NATS (test/helpers/test-backend.ts).
process.env['SGW_TEST_BACKEND'] = 'nats'
await import('../gateway/ingest-validation.test.js')
