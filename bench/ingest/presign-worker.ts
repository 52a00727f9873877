import { parentPort } from 'node:worker_threads'
import { creatorKeyFromSeed, signPush, type CreatorKey } from '../../harness/signed-push.js'
import type { SourceKey } from './protocol.js'

/**
 * Signs a range of ingest requests off the load generator's main thread, before a
 * phase's clock starts (node:crypto signs about 20k/s per core, so signing while
 * sending would measure the signer). Requests go back as one flat buffer of complete
 * HTTP/1.1 requests plus their end offsets, moved rather than copied.
 */

export interface SignJob {
  readonly port: number
  readonly sources: SourceKey[]
  readonly tag: string
  /** Global index of the first request; makes signal ids unique across phases. */
  readonly first: number
  readonly count: number
}

export interface SignedChunk {
  readonly data: ArrayBuffer
  readonly ends: Uint32Array
}

/** A Solana mint that passes token validation (as in the integration tests). */
const TOKEN = 'So11111111111111111111111111111111111111112'

const keys = new Map<string, CreatorKey>()

function keyFor(source: SourceKey): CreatorKey {
  let key = keys.get(source.sourceId)
  if (key === undefined) {
    key = creatorKeyFromSeed(Buffer.from(source.seedBase64, 'base64'))
    keys.set(source.sourceId, key)
  }
  return key
}

function requestBytes(job: SignJob, i: number): Buffer {
  const source = job.sources[i % job.sources.length] as SourceKey
  const signed = signPush({
    sourceId: source.sourceId,
    keyId: source.keyId,
    key: keyFor(source),
    payload: {
      signal_id: `bench-${job.tag}-${i}`,
      source_id: source.sourceId,
      ts: new Date().toISOString(),
      token: TOKEN,
      severity: 'warning',
      confidence: 80,
      note: 'large transfer to a fresh wallet',
    },
  })
  let head = `POST ${signed.path} HTTP/1.1\r\nHost: 127.0.0.1:${job.port}\r\nContent-Length: ${signed.body.length}\r\n`
  for (const [name, value] of Object.entries(signed.headers)) head += `${name}: ${value}\r\n`
  return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), signed.body])
}

function sign(job: SignJob): SignedChunk {
  const parts: Buffer[] = []
  const ends = new Uint32Array(job.count)
  let size = 0
  for (let n = 0; n < job.count; n++) {
    const bytes = requestBytes(job, job.first + n)
    parts.push(bytes)
    size += bytes.length
    ends[n] = size
  }
  const data = new Uint8Array(size)
  let offset = 0
  for (const part of parts) {
    data.set(part, offset)
    offset += part.length
  }
  return { data: data.buffer, ends }
}

parentPort?.on('message', (job: SignJob) => {
  const chunk = sign(job)
  parentPort?.postMessage(chunk, [chunk.data, chunk.ends.buffer as ArrayBuffer])
})
