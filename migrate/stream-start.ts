import { jetstreamManager } from '@nats-io/jetstream'
import type { NatsConnection } from '@nats-io/transport-node'
import { signalStreamOptions } from '../backends/index.js'
import type { Config } from '../config/index.js'
import { API_CODE, apiCode } from '../pipeline/jetstream/nats-errors.js'
import { openJetStreamLog } from '../pipeline/log-jetstream.js'
import { MigrationError } from './migration-error.js'

/**
 * Creates the cluster's signal stream (as every process of the cluster opens it) and has
 * it number its first record after the journal's last: a purge "up to" that sequence on
 * an empty stream moves its first sequence there (nats-server 2.9 has no `first_seq` in
 * the stream config; measured on 2.9.10). Everything that names a log position then
 * stays valid across the move: event ids (the SSE `id:`, `Last-Event-ID`, polling
 * cursors), webhook positions and endpoints' start, dispute placements. A client resuming
 * from an event the journal held gets every event after it that the stream holds.
 * Run again on a stream it already moved, it changes nothing.
 */
export async function startStreamAfter(nc: NatsConnection, config: Config, journalLastSeq: number): Promise<{ readonly firstSeq: number }> {
  const log = await openJetStreamLog(signalStreamOptions(config, nc))
  await log.close()
  const jsm = await jetstreamManager(nc)
  const state = (await jsm.streams.info(config.NATS_STREAM)).state
  const next = journalLastSeq + 1
  if (state.messages === 0 && state.last_seq === journalLastSeq) return { firstSeq: next }
  if (state.messages > 0 || state.last_seq > journalLastSeq) {
    throw new MigrationError('cluster_not_empty', `the signal stream ${config.NATS_STREAM} holds records of its own (last seq ${state.last_seq}): the cluster took signals before the move`)
  }
  await jsm.streams.purge(config.NATS_STREAM, { seq: next })
  return { firstSeq: next }
}

/** The last sequence of the cluster's signal stream, 0 when it holds none or does not exist yet. */
export async function streamLastSeq(nc: NatsConnection, stream: string): Promise<number> {
  const jsm = await jetstreamManager(nc)
  try {
    return (await jsm.streams.info(stream)).state.last_seq
  } catch (err) {
    // No such stream: nothing was ever appended.
    if (apiCode(err) === API_CODE.StreamNotFound) return 0
    throw err
  }
}
