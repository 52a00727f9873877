import { bearer, control, errors, json, noInput, nullable, ok, path, time, withBody } from './openapi-parts.js'

/**
 * The receipt log's routes (gateway/reads/log-routes.ts). The checkpoint, the keys and
 * the tiles are public and outside the receipt read allowance, so they take no security
 * requirement; the proof and the consistency proof let the public in and take a read.
 */

const base64 = { type: 'string', contentEncoding: 'base64' }
const hashes = { type: 'array', items: { ...base64, description: 'a 32-byte SHA-256 hash' } }
const text = (description: string) => ({ description, content: { 'text/plain; charset=utf-8': { schema: { type: 'string' } } } })
const noCache = { 'Cache-Control': { description: 'no-cache: the answer changes as the log grows or its keys rotate', schema: { type: 'string' } } }
/** A tree size, as the consistency route reads it: a whole number, no leading zeros, at most 16 digits. */
const treeSize = (name: string, description: string) => ({ name, in: 'query', required: true, description, schema: { type: 'string', pattern: '^(0|[1-9][0-9]{0,15})$' } })

/** A log key as `GET /v1/log/keys` and the rotation list it. */
const LogKey = {
  type: 'object',
  required: ['key_id', 'verifier_key', 'state', 'created_at', 'retires_at'],
  properties: {
    key_id: { type: 'string', pattern: '^lk_[0-9a-f]{16}$' },
    verifier_key: { type: 'string', description: 'the signed-note verifier key: <name>+<key id, 8 hex digits>+<base64 of 0x01 and the 32-byte Ed25519 public key>' },
    state: { enum: ['active', 'retiring', 'retired'], description: 'active: signs now; retiring: still signs until retires_at; retired: signs no more' },
    created_at: time,
    retires_at: nullable('string', { format: 'date-time' }),
  },
}
const signedSizes = {
  first_size: nullable('integer', { minimum: 0, description: 'the first tree size it signed; null before its first checkpoint' }),
  last_size: nullable('integer', { minimum: 0, description: 'the last tree size it signed' }),
  checkpoints: { type: 'integer', minimum: 0, description: 'how many checkpoints it signed' },
}

const ProofBundle = {
  type: 'object',
  required: ['leaf_index', 'leaf', 'inclusion_proof', 'checkpoint'],
  properties: {
    leaf_index: { type: 'integer', minimum: 0 },
    leaf: { ...base64, description: 'the leaf bytes (version 1)' },
    inclusion_proof: hashes,
    checkpoint: { type: 'string', description: 'the signed checkpoint (C2SP tlog-checkpoint note) the proof is against' },
    request: {
      type: 'object',
      description: "the creator's signed request: readers entitled to the whole receipt only",
      required: ['method', 'path', 'timestamp', 'nonce', 'body', 'key_id', 'signature', 'public_key'],
      properties: {
        method: { type: 'string' },
        path: { type: 'string' },
        timestamp: { type: 'string' },
        nonce: { type: 'string' },
        body: { ...base64, description: 'the exact body the creator signed' },
        key_id: { type: 'string' },
        signature: { ...base64, description: "the creator's 64-byte Ed25519 signature" },
        public_key: { ...base64, description: "the creator's 32-byte Ed25519 public key" },
      },
    },
    salts: {
      type: 'object',
      description: "the 16-byte salt of each of the leaf's commitments: readers entitled to the whole receipt only",
      properties: Object.fromEntries(['signal_id', 'key', 'note', 'request', 'body', 'signature'].map((c) => [c, base64])),
    },
  },
}

/** The tile routes: the index N in x-prefixed groups of three digits (its slashes are path separators), `.p/<W>` for a partial tile of W (1 to 255). */
const tileIndex = {
  name: 'index',
  in: 'path',
  required: true,
  description: 'N in groups of three digits, all but the last prefixed with x (1234067 is x001/x234/067), then .p/<W> for a partial tile of the first W (1 to 255); its slashes are path separators',
  schema: { type: 'string', pattern: '^(x[0-9]{3}/)*[0-9]{3}(\\.p/[1-9][0-9]{0,2})?$' },
}
const tile = (description: string, parameters: object[]) => ({
  get: {
    description: `${description}. Only tiles within the latest checkpoint are served; anything else is 404 not_found`,
    parameters,
    responses: {
      '200': {
        description: 'the tile',
        headers: { 'Cache-Control': { description: 'public, max-age=31536000, immutable for a full tile (it never changes); public, max-age=60 for a partial one', schema: { type: 'string' } } },
        content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
      },
      ...errors(404, 503),
    },
  },
})

export function logPaths(): Record<string, unknown> {
  return {
    '/v1/log/checkpoint': {
      get: {
        description: 'the latest checkpoint of the receipt log as a C2SP tlog-checkpoint signed note: the origin, the tree size and the base64 root hash, an empty line, one signature line per signing key. Public, outside the receipt read allowance; takes no query parameters',
        responses: { '200': { ...text('the signed checkpoint'), headers: noCache }, ...errors(400, 404, 503) },
      },
    },
    '/v1/log/key': {
      get: {
        description: 'the verifier key of the log key signing now, one line (<name>+<key id hex>+<base64 key>). Public; takes no query parameters',
        responses: { '200': { ...text('the verifier key'), headers: noCache }, ...errors(400, 503) },
      },
    },
    '/v1/log/keys': {
      get: {
        description: 'every key the receipt log ever used, retired ones included, with the tree sizes each signed. Public; takes no query parameters',
        responses: { '200': { description: 'the log keys, oldest first', ...ok({ type: 'array', items: { ...LogKey, properties: { ...LogKey.properties, ...signedSizes } } }) }, ...errors(400, 503) },
      },
    },
    '/v1/log/tile/{level}/{index}': tile('hash tile N of level L (C2SP tlog-tiles): the hashes of the complete subtrees of 256^L leaves, 256 of them; level 0 holds the leaf hashes', [
      { name: 'level', in: 'path', required: true, schema: { type: 'integer', minimum: 0, maximum: 5 } },
      tileIndex,
    ]),
    '/v1/log/tile/entries/{index}': tile('entry bundle N (C2SP tlog-tiles): the leaves 256·N to 256·N+255, each as a 2-byte big-endian length and the leaf bytes', [tileIndex]),
    '/v1/log/consistency': {
      get: {
        security: [{}, { bearer: [] }],
        description: 'the RFC 9162 consistency proof between two tree sizes, up to the latest checkpoint\'s; one read of the receipt read allowance. 400 invalid_request for a size missing, not a whole number, from larger than to, or to past the latest checkpoint',
        parameters: [treeSize('from', 'the smaller tree size'), treeSize('to', 'the larger tree size')],
        responses: { '200': { description: 'the proof', ...ok({ type: 'object', required: ['proof'], properties: { proof: hashes } }) }, ...control(400, 429) },
      },
    },
    '/v1/byo/receipts/{receipt_id}/proof': {
      get: {
        security: [{}, { bearer: [] }],
        description:
          "a receipt's proof bundle in the receipt log, read as the receipt itself is (its access rules and read allowance): the leaf, its inclusion proof and the checkpoint for everyone who sees the receipt; " +
          "the creator's signed request and the commitments' salts too for its creator, a renter with an active rental of its source and the admin. 404 for a receipt the caller cannot see and for a test receipt (never logged)",
        parameters: [path('receipt_id')],
        responses: {
          '200': { description: 'the proof bundle', ...ok(ProofBundle) },
          ...control(404, 409, 429),
          // Replaces the generic 409 (every code of that status) with the one this route answers.
          '409': {
            description: 'not_yet_logged: no signed checkpoint holds the leaf yet (about a second after the 202); retry after Retry-After',
            headers: { 'Retry-After': { description: '1', schema: { type: 'integer' } } },
            ...json({ $ref: '#/components/schemas/ErrorBody' }),
          },
        },
      },
    },
    '/v1/admin/log-keys/rotate': {
      post: {
        security: bearer,
        description:
          'makes a new log key (admin token); the one signing until now keeps signing next to it for RECEIPT_LOG_KEY_OVERLAP_S (7 days), so a verifier that knows either key accepts every checkpoint of the overlap. 409 limit_exceeded once the log holds its most keys (it keeps every key it ever used)',
        requestBody: noInput,
        responses: { '200': { description: 'the log keys after the rotation, oldest first', ...ok({ type: 'array', items: LogKey }) }, ...withBody(409) },
      },
    },
  }
}
