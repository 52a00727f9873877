import { isIP } from 'node:net'
import Type from 'typebox'
import { Compile } from 'typebox/compile'
// The limits' own files, not the stages' entries: a configuration error is reported
// before the service's modules load (service/main.ts).
import { JOURNAL_DEFAULTS } from '../pipeline/journal/journal-options.js'
import { MAX_TOKEN_CHARS } from '../registry/records.js'
import { RECORD_BATCH_MAX } from '../receipts/limits.js'

import { parseTrustedProxies } from './trusted-proxies.js'

export { missingNodeFlags, NODE_FLAGS } from './node-flags.js'
export { parseTrustedProxies } from './trusted-proxies.js'

/**
 * Configuration is declared once here: every variable, its default and its bounds.
 * The schema is closed; an unknown variable with one of our prefixes (OWN_PREFIXES)
 * is refused too, so a typo never falls back to a default silently.
 */
const Env = {
  ROLE: { type: 'enum', default: 'all', values: ['all', 'gateway', 'recorder', 'delivery'], help: 'what this process runs: gateway (ingest, control plane, reads), recorder (receipts), delivery (streams, polling, webhooks), or all of them (docs/operations.md, Roles)' },
  PORT: { type: 'int', default: 8080, min: 0, max: 65535, help: 'TCP port to listen on (0 picks a free one)' },
  HOST: { type: 'string', default: '0.0.0.0', help: 'address to bind: an IPv4 or IPv6 address of this machine (0.0.0.0 or :: for all), or localhost' },
  DATA_DIR: { type: 'string', default: './data', help: 'folder holding the journal and the registry' },
  ADMIN_TOKEN: { type: 'string', default: '', help: `admin bearer token, 32 to ${MAX_TOKEN_CHARS} visible ASCII characters; generated into DATA_DIR/admin-token when empty` },
  PUBLIC_BASE_URL: { type: 'string', default: '', help: 'base URL used in ingest_endpoint; default http://localhost:<bound port>' },
  TRUSTED_PROXIES: { type: 'string', default: '', help: 'addresses or CIDR prefixes, comma-separated, of the proxies in front of the gateway: on their connections the client address of the per-address lanes is read from X-Forwarded-For; empty trusts none' },
  NATS_URL: { type: 'string', default: '', help: 'NATS servers, comma-separated (nats://host:4222,...): the signal log on JetStream and the shared state on NATS KV, for the processes of a cluster; empty keeps both under DATA_DIR (docs/operations.md, Running a cluster)' },
  NATS_REPLICAS: { type: 'int', default: 1, min: 1, max: 5, help: 'copies of the signal stream and of each key-value bucket on NATS: 1, 3 or 5 (durability on NATS is replication)' },
  NATS_STREAM: { type: 'string', default: 'SIGNALS', help: 'name of the JetStream stream holding the signal log (1 to 64 of A-Z a-z 0-9 _ -)' },
  LOG_LEVEL: { type: 'enum', default: 'info', values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], help: 'pino log level' },
  JOURNAL_FSYNC: { type: 'enum', default: 'always', values: ['always', 'interval', 'never'], help: 'when an append counts as durable (docs/operations.md, Durability)' },
  JOURNAL_QUEUE_LIMIT: { type: 'int', default: 4096, min: 1, max: 1_000_000, help: 'verified signals waiting for the durable append before the edge sheds new requests with 503 (a slow disk must not grow memory with the connection count; each holds its body, up to 16 KB)' },
  JOURNAL_FSYNC_INTERVAL_MS: { type: 'int', default: JOURNAL_DEFAULTS.fsyncIntervalMs, min: 1, max: 60_000, help: 'sync period for JOURNAL_FSYNC=interval' },
  JOURNAL_RETENTION_MAX_AGE_S: { type: 'int', default: JOURNAL_DEFAULTS.maxAgeMs / 1000, min: 3600, max: 10 * 365 * 86400, help: 'signals older than this leave the journal (whole segments); a log consumer that had not read them is told which it lost. At least DEDUP_WINDOW_S' },
  JOURNAL_RETENTION_MAX_BYTES: { type: 'int', default: JOURNAL_DEFAULTS.maxBytes, min: 2 * JOURNAL_DEFAULTS.segmentBytes, max: 2 ** 50, help: 'past this size the oldest segments leave the journal, except signals younger than DEDUP_WINDOW_S, which a restart reads back' },
  DEDUP_WINDOW_S: { type: 'int', default: 1800, min: 1200, max: 7 * 86400, help: 'how long signal_id and Idempotency-Key are remembered; at least 20 minutes so every retry that passes the two 300 s checks is covered' },
  DEDUP_STORE_MAX: { type: 'int', default: 10_000_000, min: 10_000, max: 1_000_000_000, help: 'signals remembered for the dedup window in all (about 60 to 120 bytes each; an Idempotency-Key unlike its signal_id counts as a second): accepted signals/s × DEDUP_WINDOW_S must fit; one source may hold at most a quarter' },
  SIGNAL_ID_HISTORY_MAX: { type: 'int', default: 20_000_000, min: 1000, max: 1_000_000_000, help: 'accepted signal ids remembered past the dedup window, newest kept, so a reused one is refused (about 11 to 21 bytes each)' },
  VERIFY_THREADS: { type: 'int', default: 0, min: 0, max: 64, help: 'verification worker threads; 0 = one per core, less the one the event loop needs (at least 1)' },
  VERIFY_BATCH: { type: 'int', default: 64, min: 1, max: 4096, help: 'signatures sent to a worker in one message' },
  VERIFY_QUEUE_LIMIT: { type: 'int', default: 512, min: 1, max: 1_000_000, help: 'requests waiting for verification before the edge sheds with 503; each lane of a source (its proven addresses, the rest) holds at most a quarter of them' },
  VERIFY_MAX_WAIT_MS: { type: 'int', default: 50, min: 1, max: 60_000, help: 'shed with 503 once the oldest request waiting for verification has waited this long' },
  BODY_TIMEOUT_MS: { type: 'int', default: 5000, min: 100, max: 120_000, help: 'time allowed to receive a request body' },
  BODY_SLOW_MAX: { type: 'int', default: 1024, min: 1, max: 65_536, help: 'request bodies not complete when their head was read, being received at once; past it such a request gets 503 (memory: up to 16 KB each for ingest)' },
  NONCE_STORE_MAX: { type: 'int', default: 6_000_000, min: 10_000, max: 100_000_000, help: 'live nonces held in all (each 10 minutes, about 30 to 60 bytes): sustained signed requests/s × 600 must fit; one source, all its keys together, may hold at most a quarter' },
  INGEST_MAX_RATE_PER_S: { type: 'int', default: 1000, min: 1, max: 100_000, help: 'highest max_rate a source may declare, per second; a manifest above it is refused, and a lower value also caps sources registered before' },
  INGEST_MAX_BURST: { type: 'int', default: 10_000, min: 1, max: 100_000, help: 'highest max_rate.burst a source may declare (a manifest without burst declares its rate)' },
  INGEST_ERRORS_PER_SOURCE: { type: 'int', default: 1000, min: 10, max: 100_000, help: 'refused ingest requests kept per source' },
  INGEST_ERRORS_UNVERIFIED_MAX: { type: 'int', default: 100_000, min: 1000, max: 10_000_000, help: 'refused requests whose signature did not verify, kept over all sources together (about 450 bytes each); past it the sources with the most lose their oldest' },
  INGEST_STATE_SAVE_S: { type: 'int', default: 60, min: 0, max: 86_400, help: 'seconds between saves of the dedup and nonce state while running (each save waits at least 20 times its own duration), so a start after a crash reads only the journal since; 0 saves only at a clean stop' },
  OVER_RATE_FLAG_MINUTES: { type: 'int', default: 5, min: 1, max: 1440, help: 'minutes of 429s, never a minute apart, after which a source is flagged for review' },
  RENTALS_MAX: { type: 'int', default: 100_000, min: 1, max: 1_000_000, help: 'rentals kept in all, ended ones included (about 1 KB of memory each); past it a new rental is refused with 409 limit_exceeded' },
  RENTALS_KEEP_ENDED_DAYS: { type: 'int', default: 90, min: 1, max: 3650, help: 'days an ended or expired rental stays readable before it is deleted' },
  CLICKHOUSE_URL: { type: 'string', default: '', help: 'receipts on a ClickHouse server (http(s)://user:password@host:8123/database); empty keeps them in the embedded engine (chDB) under DATA_DIR/clickhouse' },
  CLICKHOUSE_MAX_MEMORY_MB: { type: 'int', default: 1024, min: 256, max: 1_048_576, help: 'memory ceiling of the embedded engine (max_server_memory_usage): a query past it fails, the process keeps serving' },
  CLICKHOUSE_TIMEOUT_MS: { type: 'int', default: 30_000, min: 1000, max: 3_600_000, help: 'per-request timeout towards a ClickHouse server (CLICKHOUSE_URL)' },
  STATUS_CACHE_MS: { type: 'int', default: 15_000, min: 0, max: 300_000, help: "how long a source's public status keeps its receipt figures (counts by outcome, last signal, uptime) before ClickHouse is asked again; 0 asks on every request (concurrent requests still share one query)" },
  RECORDER_BATCH: { type: 'int', default: 5000, min: 1, max: RECORD_BATCH_MAX, help: 'most signals the recorder writes to the receipt store in one insert' },
  RECORDER_FLUSH_MS: { type: 'int', default: 500, min: 0, max: 60_000, help: 'how long a recorder batch that is not full waits for more signals after its first: fewer, larger inserts, at the cost of this much recording delay' },
  RECORDER_RETRY_MAX_MS: { type: 'int', default: 30_000, min: 100, max: 600_000, help: 'longest wait between the recorder\'s attempts at a failing receipt store (waits start at 100 ms and double), and the wait after an error a retry is not expected to fix' },
  READ_RATE_ANON_PER_MIN: { type: 'int', default: 60, min: 1, max: 1_000_000, help: 'receipt reads a minute per client address without a token (an IPv6 client by its /64; through TRUSTED_PROXIES), up to a minute\'s worth at once; past it 429 with Retry-After' },
  READ_RATE_TOKEN_PER_MIN: { type: 'int', default: 600, min: 1, max: 1_000_000, help: 'receipt reads a minute per token (creators; renters outside a rented source); the admin token is not limited' },
  READ_RATE_RENTAL_PER_MIN: { type: 'int', default: 1200, min: 1, max: 1_000_000, help: 'receipt reads a minute per active rental, for its renter reading the rented source' },
  READ_RATE_TRACKED_MAX: { type: 'int', default: 100_000, min: 1000, max: 10_000_000, help: 'read allowances held in memory (about 150 bytes each); past it the least recently used is forgotten (it starts full again)' },
  EXPORT_CONCURRENT_PER_PRINCIPAL: { type: 'int', default: 2, min: 1, max: 64, help: 'receipt exports running at once per caller (role and subject); past it 429' },
  EXPORT_CONCURRENT_MAX: { type: 'int', default: 8, min: 1, max: 1024, help: 'receipt exports running at once in the process; past it 429' },
  EXPORT_IDLE_TIMEOUT_MS: { type: 'int', default: 60_000, min: 1000, max: 3_600_000, help: 'how long an export waits for a client that takes no bytes while the connection is full; past it the connection is closed before the end of the body and counted in sgw_export_failures_total{reason="idle"}' },
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: { type: 'enum', default: 'false', values: ['false', 'true'], help: 'true lets webhooks reach loopback, private and other non-public addresses and use plain http: for development and tests only' },
  WEBHOOK_RETRY_WINDOW_S: { type: 'int', default: 86_400, min: 1, max: 30 * 86_400, help: 'how long after its first attempt a failing webhook delivery is still retried before it is dead-lettered (the last attempt starts after it; below 24 hours only for tests)' },
  WEBHOOK_RETRY_FIRST_MS: { type: 'int', default: 5000, min: 1, max: 60_000, help: 'the first retry delay of a webhook delivery; the later ones scale with it (5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, then 8 h at the default)' },
  WEBHOOK_DISABLE_AFTER_S: { type: 'int', default: 5 * 86_400, min: 1, max: 90 * 86_400, help: 'a webhook endpoint failing without a success for this long is disabled (the renter sets it again to resume)' },
  WEBHOOK_LEASE_MS: { type: 'int', default: 15_000, min: 300, max: 600_000, help: 'how long a delivery process holds a shard of the rentals\' webhook loops without renewing it (renewed every third of it); after a process dies another takes its shards over after this long' },
  WEBHOOK_TESTS_PER_MINUTE: { type: 'int', default: 10, min: 1, max: 1000, help: 'test requests (POST /v1/rentals/:id/webhook/test) a rental may make in any minute, counted on the shared webhooks store; past it 429 with Retry-After' },
  WEBHOOK_CONCURRENCY: { type: 'int', default: 64, min: 1, max: 4096, help: 'webhook connections open at once, all endpoints together' },
  DELIVERY_KEY_OVERLAP_S: { type: 'int', default: 7 * 86_400, min: 0, max: 90 * 86_400, help: 'after a delivery key rotation, how long the previous key keeps signing webhook deliveries next to the new one' },
  RECEIPT_LOG_CHECKPOINT_MS: { type: 'int', default: 1000, min: 100, max: 60_000, help: 'the least time between two checkpoints of the receipt log while leaves arrive: a receipt is in a signed checkpoint within about this much of its 202' },
  RECEIPT_LOG_KEY_OVERLAP_S: { type: 'int', default: 7 * 86_400, min: 0, max: 90 * 86_400, help: 'after a log key rotation, how long the previous key keeps signing checkpoints next to the new one' },
  STREAM_MAX_PER_RENTAL: { type: 'int', default: 5, min: 1, max: 1000, help: 'event streams (SSE) open at once per rental, over every delivery process of a cluster on NATS; the next gets 429 with Retry-After' },
  STREAM_HEARTBEAT_MS: { type: 'int', default: 15_000, min: 100, max: 300_000, help: 'period of the comment line (": ping") each open event stream gets' },
  STREAM_RETRY_MS: { type: 'int', default: 3000, min: 0, max: 600_000, help: 'the reconnection delay (SSE retry:) streams tell their clients' },
  STREAM_BUFFER_BYTES: { type: 'int', default: 1024 * 1024, min: 16 * 1024, max: 256 * 1024 * 1024, help: 'bytes of events one stream may have waiting for a slow reader; past it the stream is disconnected (the client resumes from its last event id)' },
  STREAM_STALL_TIMEOUT_MS: { type: 'int', default: 8000, min: 100, max: 8000, help: 'an event stream whose reader takes nothing for this long while events wait to be written is disconnected (the client resumes from its last event id); at most 8 s, as the HTTP server closes such a connection itself after 10 s' },
  STREAM_TICKET_TTL_MS: { type: 'int', default: 60_000, min: 1000, max: 3_600_000, help: 'how long a stream ticket (POST /v1/rentals/:id/stream-tickets) stays valid; each is good for one stream' },
  STREAM_TICKETS_MAX_PER_RENTAL: { type: 'int', default: 20, min: 1, max: 1000, help: 'stream tickets one rental may have outstanding (issued, not used, not expired) at once, over every process sharing the tickets; the next gets 429 with Retry-After' },
  STREAM_TICKETS_MAX_PER_RENTER: { type: 'int', default: 200, min: 1, max: 5000, help: 'stream tickets one renter may have outstanding at once over all its rentals, over every process sharing the tickets; the next gets 429 with Retry-After' },
  STREAM_END_SETTLE_MS: { type: 'int', default: 2000, min: 0, max: 120_000, help: 'how long after a rental ends its streams and polls wait before byo.rental.ended, for signals received before the end whose append lands just after it' },
  OTEL_EXPORTER_OTLP_ENDPOINT: { type: 'string', default: '', help: 'base URL of an OpenTelemetry collector taking OTLP over HTTP (http://collector:4318): spans of ingest, the log append, recording and webhook delivery are posted to <it>/v1/traces; empty turns tracing off' },
  OTEL_SERVICE_NAME: { type: 'string', default: 'signal-ingest-gateway', help: 'service.name of the exported spans' },
  TRACE_SAMPLE_PERCENT: { type: 'int', default: 100, min: 1, max: 100, help: 'percentage of traces recorded when tracing is on (by trace id; a span whose parent is recorded is recorded too)' },
  SHUTDOWN_GRACE_MS: { type: 'int', default: 10_000, min: 0, max: 600_000, help: 'how long SIGTERM waits for in-flight requests' },
} as const

/** Every variable's name, for the checks that deployment files set only these. */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(Env)

type Spec = (typeof Env)[keyof typeof Env]
type ValueOf<S extends Spec> = S extends { type: 'int' } ? number : S extends { type: 'enum'; values: readonly (infer V)[] } ? V : string

export type Config = { -readonly [K in keyof typeof Env]: ValueOf<(typeof Env)[K]> }
/** The parts a process runs (ROLE). */
export type Role = Config['ROLE']

/**
 * Prefixes that are ours: a variable starting with one must be a known one, so a typo
 * (SHUTDOWN_GRACE_SM) stops the start instead of silently keeping a default. Generic
 * prefixes other software also uses (DATA_, LOG_) are left out.
 */
const OWN_PREFIXES = ['GATEWAY_', 'TRACE_', 'RECEIPT_LOG_', 'OTEL_', 'JOURNAL_', 'VERIFY_', 'DEDUP_', 'INGEST_', 'NONCE_', 'SIGNAL_ID_', 'BODY_', 'OVER_RATE_', 'SHUTDOWN_', 'RENTALS_', 'CLICKHOUSE_', 'RECORDER_', 'READ_RATE_', 'EXPORT_', 'ADMIN_', 'PUBLIC_BASE', 'TRUSTED_PROX', 'STATUS_', 'WEBHOOK_', 'DELIVERY_KEY', 'STREAM_']

/**
 * An admin token must be guessable by nobody and sendable as `Bearer <token>`: 32 to
 * MAX_TOKEN_CHARS characters (a generated one has 53), visible ASCII, no spaces. A
 * longer one would pass here and then fail every request.
 */
export function isUsableAdminToken(token: string): boolean {
  return token.length >= 32 && token.length <= MAX_TOKEN_CHARS && /^[\x21-\x7e]+$/.test(token)
}

export class ConfigError extends Error {
  readonly code = 'invalid_config'
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}

function schemaFor(spec: Spec) {
  switch (spec.type) {
    case 'int':
      return Type.Integer({ minimum: spec.min, maximum: spec.max })
    case 'enum':
      return Type.Union(spec.values.map((v) => Type.Literal(v)))
    default:
      return Type.String({ maxLength: 4096 })
  }
}

const ConfigSchema = Type.Object(
  Object.fromEntries(Object.entries(Env).map(([k, spec]) => [k, schemaFor(spec)])),
  { additionalProperties: false },
)
const checkConfig = Compile(ConfigSchema)

/** Reads the configuration from `env`; throws ConfigError naming the variable and the fix. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  for (const name of Object.keys(env)) {
    if (OWN_PREFIXES.some((p) => name.startsWith(p)) && !(name in Env)) {
      throw new ConfigError(`unknown variable ${name}: known ones are ${Object.keys(Env).join(', ')}`)
    }
  }
  const out: Record<string, unknown> = {}
  for (const [name, spec] of Object.entries(Env) as [string, Spec][]) {
    const raw = env[name]
    if (raw === undefined || raw === '') {
      out[name] = spec.default
      continue
    }
    if (spec.type === 'int') {
      if (!/^\d+$/.test(raw)) throw new ConfigError(`${name}=${JSON.stringify(raw)} is not a whole number: ${spec.help} (${spec.min} to ${spec.max})`)
      out[name] = Number(raw)
    } else {
      out[name] = raw
    }
  }
  if (!checkConfig.Check(out)) {
    const first = [...checkConfig.Errors(out)][0]
    const name = first?.instancePath.replace(/^\//, '') ?? 'configuration'
    const spec = (Env as Record<string, Spec>)[name]
    const hint = spec === undefined ? '' : spec.type === 'int' ? ` (${spec.min} to ${spec.max})` : spec.type === 'enum' ? ` (one of ${spec.values.join(', ')})` : ''
    throw new ConfigError(`${name}=${JSON.stringify(env[name] ?? '')} is not valid: ${spec?.help ?? first?.message}${hint}`)
  }
  const config = out as Config
  if (config.ADMIN_TOKEN !== '' && !isUsableAdminToken(config.ADMIN_TOKEN)) {
    throw new ConfigError(`ADMIN_TOKEN is not valid: ${Env.ADMIN_TOKEN.help} (got ${config.ADMIN_TOKEN.length} characters)`)
  }
  // A name would be resolved at bind time, where a failure cannot tell a typo from a port in use.
  if (config.HOST !== 'localhost' && isIP(config.HOST) === 0) {
    throw new ConfigError(`HOST=${JSON.stringify(config.HOST)} is not valid: ${Env.HOST.help}`)
  }
  // A restart reads the dedup window's signals back from the journal: retention must keep them.
  if (config.JOURNAL_RETENTION_MAX_AGE_S < config.DEDUP_WINDOW_S) {
    throw new ConfigError(`JOURNAL_RETENTION_MAX_AGE_S=${config.JOURNAL_RETENTION_MAX_AGE_S} is shorter than DEDUP_WINDOW_S=${config.DEDUP_WINDOW_S}: the journal must keep at least the dedup window`)
  }
  if (config.NATS_URL !== '') checkClusterConfig(config)
  // The exporter is given <endpoint>/v1/traces: a path of the endpoint's own would be kept before it.
  if (config.OTEL_EXPORTER_OTLP_ENDPOINT !== '' && !/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/i.test(config.OTEL_EXPORTER_OTLP_ENDPOINT)) {
    throw new ConfigError(`OTEL_EXPORTER_OTLP_ENDPOINT=${JSON.stringify(config.OTEL_EXPORTER_OTLP_ENDPOINT)} is not valid: ${Env.OTEL_EXPORTER_OTLP_ENDPOINT.help}`)
  }
  try {
    parseTrustedProxies(config.TRUSTED_PROXIES)
  } catch (err) {
    throw new ConfigError(`TRUSTED_PROXIES is not valid: ${(err as Error).message}`)
  }
  // An empty PUBLIC_BASE_URL becomes http://localhost:<bound port> once the gateway listens.
  // An origin, no path: the gateway serves /v1/... at its root, and a creator signs the
  // path it sends, so a prefix a proxy strips would break every signature.
  // No user:password@ either: the URL is handed out in every ingest_endpoint.
  if (config.PUBLIC_BASE_URL !== '') {
    const origin = originOf(config.PUBLIC_BASE_URL)
    if (origin === undefined) {
      throw new ConfigError(
        `PUBLIC_BASE_URL=${JSON.stringify(config.PUBLIC_BASE_URL)} is not valid: give the http(s) origin the gateway is reached at, without a path or credentials, such as https://ingest.example.com`,
      )
    }
    config.PUBLIC_BASE_URL = origin
  }
  return config
}

/**
 * The rules of a process on NATS (NATS_URL set). Each process keeps its own DATA_DIR, so
 * a generated admin token would differ between the processes of one cluster: the token is
 * given.
 */
function checkClusterConfig(config: Config): void {
  if (config.ADMIN_TOKEN === '') {
    throw new ConfigError('NATS_URL is set but ADMIN_TOKEN is not: every process of a cluster has its own DATA_DIR, so a generated token would differ between them; set the same ADMIN_TOKEN on each process')
  }
  if (![1, 3, 5].includes(config.NATS_REPLICAS)) {
    throw new ConfigError(`NATS_REPLICAS=${config.NATS_REPLICAS} is not valid: 1, 3 or 5 (an odd count keeps a majority through the loss of a server)`)
  }
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(config.NATS_STREAM)) {
    throw new ConfigError(`NATS_STREAM=${JSON.stringify(config.NATS_STREAM)} is not valid: ${Env.NATS_STREAM.help}`)
  }
}

/**
 * The origin `value` names (scheme and host lower-cased, a default port dropped), if it is
 * an http(s) URL with a host and nothing after it but an optional `/`. The WHATWG parser
 * checks the host and port; the pattern refuses what it would quietly forgive (spaces,
 * backslashes, an empty `?` or `#`).
 */
function originOf(value: string): string | undefined {
  if (!/^https?:\/\/[^\s/?#@\\]+\/?$/i.test(value)) return undefined
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return undefined
  }
  return url.hostname === '' || url.pathname !== '/' ? undefined : url.origin
}

/** For `--help` (and docs/operations.md, Configuration): every variable with its default. */
export function describeConfig(): string {
  return Object.entries(Env)
    .map(([k, s]) => `${k} (default ${JSON.stringify(s.default)}): ${s.help}`)
    .join('\n')
}
