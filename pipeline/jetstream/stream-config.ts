/**
 * Options of the JetStream signal log and the stream they describe: declared once,
 * defaults filled in, checked at open with messages that name the option. Unknown
 * options are refused, as the journal's are.
 *
 * One stream holds the log. A record with a source is stored on the subject
 * `<subjectPrefix>.<sourceId>` (a source id is one subject token), one without on
 * `<subjectPrefix>` alone, so a consumer's source filter is the JetStream filter
 * subject and the server does the filtering.
 */
import type { NatsConnection } from '@nats-io/transport-node'
import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream'
import type { StreamConfig } from '@nats-io/jetstream'
import { nanos } from '@nats-io/transport-node'
import { LogError } from '../log-error.js'

export interface JetStreamLogOptions {
  /** A connected client; the log leaves it open at close. Give this or `servers`. */
  connection?: NatsConnection
  /** Server urls to connect to (the log then owns the connection and closes it). */
  servers?: string | string[]
  /** The stream's name, `[A-Za-z0-9_-]{1,64}`; created if absent. */
  stream: string
  /** First subject token(s) of the stream's subjects, `[A-Za-z0-9_-]` tokens joined by dots. Default 'signals'. */
  subjectPrefix?: string
  /** Copies of the stream (1, 3 or 5); durability on NATS is replication. Default 1. */
  replicas?: number
  /** How long a dedup id is remembered (JetStream duplicate_window). At least 1 ms: 0 is not a window JetStream has. */
  dedupWindowMs: number
  /** Retention by age (max_age); Infinity (default) keeps records whatever their age. */
  maxAgeMs?: number
  /** Retention by size (max_bytes); Infinity (default) for no limit. */
  maxBytes?: number
  /** How long one request to the server may take before it counts as `unavailable`. Default 5,000 ms. */
  requestTimeoutMs?: number
}

export interface FilledJetStreamLogOptions {
  readonly connection: NatsConnection | undefined
  readonly servers: string | string[] | undefined
  readonly stream: string
  readonly subjectPrefix: string
  readonly replicas: number
  readonly dedupWindowMs: number
  readonly maxAgeMs: number
  readonly maxBytes: number
  readonly requestTimeoutMs: number
}

export const JETSTREAM_DEFAULTS = {
  subjectPrefix: 'signals',
  replicas: 1,
  maxAgeMs: Number.POSITIVE_INFINITY,
  maxBytes: Number.POSITIVE_INFINITY,
  requestTimeoutMs: 5_000,
} as const

const KNOWN = ['connection', 'servers', 'stream', 'subjectPrefix', 'replicas', 'dedupWindowMs', 'maxAgeMs', 'maxBytes', 'requestTimeoutMs']
const STREAM_NAME = /^[A-Za-z0-9_-]{1,64}$/
const PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

export function fillJetStreamOptions(opts: JetStreamLogOptions): FilledJetStreamLogOptions {
  if (typeof opts !== 'object' || opts === null) throw invalid('options must be an object')
  for (const key of Object.keys(opts)) if (!KNOWN.includes(key)) throw invalid(`unknown option "${key}"; known: ${KNOWN.join(', ')}`)
  if ((opts.connection === undefined) === (opts.servers === undefined)) throw invalid('give exactly one of connection and servers')
  if (typeof opts.stream !== 'string' || !STREAM_NAME.test(opts.stream)) throw invalid('stream must be 1 to 64 of [A-Za-z0-9_-]')
  const subjectPrefix = opts.subjectPrefix ?? JETSTREAM_DEFAULTS.subjectPrefix
  if (typeof subjectPrefix !== 'string' || !PREFIX.test(subjectPrefix)) throw invalid('subjectPrefix must be dot-separated tokens of [A-Za-z0-9_-]')
  const replicas = opts.replicas ?? JETSTREAM_DEFAULTS.replicas
  if (![1, 3, 5].includes(replicas)) throw invalid('replicas must be 1, 3 or 5')
  if (!Number.isSafeInteger(opts.dedupWindowMs) || opts.dedupWindowMs < 1) throw invalid('dedupWindowMs must be an integer of at least 1')
  const maxAgeMs = limit(opts.maxAgeMs ?? JETSTREAM_DEFAULTS.maxAgeMs, 'maxAgeMs')
  const maxBytes = limit(opts.maxBytes ?? JETSTREAM_DEFAULTS.maxBytes, 'maxBytes')
  // JetStream refuses a duplicate window longer than max_age: an id outlives its record.
  if (opts.dedupWindowMs > maxAgeMs) throw invalid('dedupWindowMs must not exceed maxAgeMs')
  const requestTimeoutMs = opts.requestTimeoutMs ?? JETSTREAM_DEFAULTS.requestTimeoutMs
  if (!Number.isSafeInteger(requestTimeoutMs) || requestTimeoutMs < 1) throw invalid('requestTimeoutMs must be a positive integer')
  return { connection: opts.connection, servers: opts.servers, stream: opts.stream, subjectPrefix, replicas, dedupWindowMs: opts.dedupWindowMs, maxAgeMs, maxBytes, requestTimeoutMs }
}

function limit(value: number, name: string): number {
  if (value === Number.POSITIVE_INFINITY) return value
  if (!Number.isSafeInteger(value) || value < 1) throw invalid(`${name} must be a positive integer or Infinity`)
  return value
}

function invalid(message: string): LogError {
  return new LogError('invalid_argument', `JetStream log options: ${message}`)
}

/** Subject of a record of `sourceId` ('' for none). */
export function subjectFor(prefix: string, sourceId: string): string {
  return sourceId === '' ? prefix : `${prefix}.${sourceId}`
}

/** The source id a record's subject carries ('' for none). */
export function sourceOf(prefix: string, subject: string): string {
  return subject.length > prefix.length ? subject.slice(prefix.length + 1) : ''
}

/**
 * The stream: file storage, limits retention (records stay until age or size removes
 * them, whoever has read them), discard old, the dedup window, and direct gets allowed.
 */
export function streamConfig(o: FilledJetStreamLogOptions): Partial<StreamConfig> & { name: string } {
  return {
    name: o.stream,
    subjects: [o.subjectPrefix, `${o.subjectPrefix}.*`],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    num_replicas: o.replicas,
    duplicate_window: nanos(o.dedupWindowMs),
    max_age: o.maxAgeMs === Number.POSITIVE_INFINITY ? 0 : nanos(o.maxAgeMs),
    max_bytes: o.maxBytes === Number.POSITIVE_INFINITY ? -1 : o.maxBytes,
    max_msgs: -1,
    allow_direct: true,
  }
}
