import { control, ok, path, time } from './openapi-parts.js'

/** A count of receipts by one key (a severity, an outcome). */
const counts = { type: 'object', additionalProperties: { type: 'integer', minimum: 0 } }
const outcomes = { type: 'object', required: ['pending', 'hit', 'miss', 'void'], properties: Object.fromEntries(['pending', 'hit', 'miss', 'void'].map((o) => [o, { type: 'integer', minimum: 0 }])) }

/** `GET /v1/byo/sources/{source_id}/stats`: a source's receipts counted per minute or hour (gateway/reads/stats-route.ts). */
export function statsPaths(): Record<string, unknown> {
  return {
    '/v1/byo/sources/{source_id}/stats': {
      get: {
        security: [{}, { bearer: [] }],
        description:
          "a source's receipts (never test receipts) counted per bucket of emitted_at, by severity and by outcome, every bucket of the window listed oldest first. " +
          'Read as its receipt list is: its creator, the admin and a renter with an active rental of it count everything; anyone else a source whose listing has public_receipts, up to the public delay only; otherwise 404. ' +
          'The window is at most 1440 buckets (400 invalid_request beyond): to (default now) is rounded up to the bucket, from (default 60 minutes or 24 hours before to) down',
        parameters: [
          path('source_id'),
          { name: 'bucket', in: 'query', schema: { enum: ['minute', 'hour'], default: 'minute' } },
          { name: 'from', in: 'query', schema: { type: 'string', format: 'date-time', description: 'emitted_at at or after (rounded down to the bucket)' } },
          { name: 'to', in: 'query', schema: { type: 'string', format: 'date-time', description: 'emitted_at before (rounded up to the bucket); after from' } },
        ],
        responses: {
          '200': {
            description: 'the counts',
            ...ok({
              type: 'object',
              properties: {
                source_id: { type: 'string' },
                bucket: { enum: ['minute', 'hour'] },
                from: time,
                to: time,
                totals: { type: 'object', properties: { total: { type: 'integer' }, severity: counts, outcome: outcomes } },
                buckets: { type: 'array', maxItems: 1440, items: { type: 'object', properties: { start: time, total: { type: 'integer' }, severity: counts, outcome: outcomes } } },
              },
            }),
          },
          ...control(400, 404, 429),
        },
      },
    },
  }
}
