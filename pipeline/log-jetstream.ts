/**
 * The signal log on NATS JetStream (the cluster deployment), behind the `SignalLog`
 * contract of `./log.ts`; `./log-journal.ts` is the embedded one. What the adapter
 * promises and where it differs from the journal: `./jetstream/jetstream-log.ts`.
 */
import type { SignalLog } from './log.js'
import { JetStreamLog } from './jetstream/jetstream-log.js'
import { fillJetStreamOptions } from './jetstream/stream-config.js'
import type { JetStreamLogOptions } from './jetstream/stream-config.js'

export type { JetStreamLogOptions } from './jetstream/stream-config.js'
export { JETSTREAM_DEFAULTS } from './jetstream/stream-config.js'

/** Opens the log on `opts.stream`, creating the stream if absent. */
export async function openJetStreamLog(opts: JetStreamLogOptions): Promise<SignalLog> {
  const log = new JetStreamLog(fillJetStreamOptions(opts))
  await log.open()
  return log
}
