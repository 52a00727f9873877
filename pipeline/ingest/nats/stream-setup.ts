import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream'
import type { JetStreamManager, StreamConfig } from '@nats-io/jetstream'
import type { NatsConnection } from '@nats-io/transport-node'
import { LogError } from '../../log-error.js'
import { API_CODE } from '../../jetstream/nats-errors.js'
import { apiCodeOf, stateError } from './nats-state-errors.js'

const NAME = /^[A-Za-z0-9_-]{1,64}$/
const PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

/** Refuses a stream name or subject prefix JetStream would not take, naming the option. */
export function checkNames(stream: string, subjectPrefix: string): void {
  if (!NAME.test(stream)) throw new LogError('invalid_argument', `stream name "${stream}" must be 1 to 64 of [A-Za-z0-9_-]`)
  if (!PREFIX.test(subjectPrefix)) throw new LogError('invalid_argument', `subject prefix "${subjectPrefix}" must be dot-separated tokens of [A-Za-z0-9_-]`)
}

/**
 * Creates the stream, or brings an existing one to `config` (a restart with another
 * window or bound takes effect), and returns the manager the adapter keeps.
 */
export async function ensureStream(nc: NatsConnection, config: Partial<StreamConfig> & { name: string }): Promise<JetStreamManager> {
  try {
    const jsm = await jetstreamManager(nc)
    const full: Partial<StreamConfig> & { name: string } = { retention: RetentionPolicy.Limits, storage: StorageType.File, ...config }
    let have: StreamConfig
    try {
      have = (await jsm.streams.info(config.name)).config
    } catch (err) {
      if (apiCodeOf(err) !== API_CODE.StreamNotFound) throw err
      await jsm.streams.add(full)
      return jsm
    }
    await jsm.streams.update(config.name, { ...have, ...full })
    return jsm
  } catch (err) {
    throw stateError(`setting up stream ${config.name}`, err)
  }
}
