import { basename } from 'node:path'
import t from 'tap'
import { connect } from '@nats-io/transport-node'
import type { NatsConnection, Status } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import type { JetStreamManager } from '@nats-io/jetstream'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { openJetStreamLog } from '../../pipeline/log-jetstream.js'
import type { JetStreamLogOptions } from '../../pipeline/log-jetstream.js'
import type { SignalLog } from '../../pipeline/log.js'
import { logContract } from '../contracts/log-contract.js'

const WINDOW = 20 * 60_000

// One server for the file (a missing nats-server fails here, with the install command).
const server = await startNatsServer()
const node = server.nodes[0]!
const nc = await connect({ servers: node.url, reconnectTimeWait: 50, maxReconnectAttempts: -1, pingInterval: 1_000 })
const jsm = await jetstreamManager(nc)
t.teardown(async () => {
  await nc.close()
  await server.close()
})

const streams = new WeakMap<SignalLog, string>()

/** Each contract case gets its own stream and subjects, named after its folder. */
function streamOf(dir: string): string {
  return basename(dir).replace(/[^A-Za-z0-9_-]/g, '_')
}

async function open(stream: string, o: Partial<JetStreamLogOptions> = {}): Promise<SignalLog> {
  const log = await openJetStreamLog({ connection: nc, stream, subjectPrefix: `t.${stream}`, dedupWindowMs: WINDOW, requestTimeoutMs: 2_000, ...o })
  streams.set(log, stream)
  return log
}

/** Waits for the shared connection's next status of `type`. */
async function statusOf(type: Status['type']): Promise<void> {
  for await (const s of nc.status()) if (s.type === type) return
}

/** Removes the records before `beforeSeq` as size retention does (not a purge): max_msgs lowered, then lifted. */
async function trimBefore(jsm: JetStreamManager, stream: string, beforeSeq: number): Promise<void> {
  const info = await jsm.streams.info(stream)
  await jsm.streams.update(stream, { ...info.config, max_msgs: info.state.last_seq - beforeSeq + 1 })
  await jsm.streams.update(stream, { ...info.config, max_msgs: -1 })
}

logContract(t, 'jetstream', (dir) => open(streamOf(dir)), {
  expire: (log, beforeSeq) => trimBefore(jsm, streams.get(log)!, beforeSeq),
  makeUnavailable: async () => {
    const down = statusOf('disconnect')
    await node.stop()
    await down
    return async () => {
      const up = statusOf('reconnect')
      await node.restart()
      await up
      // JetStream answers a moment after the client reconnects.
      for (;;) {
        try {
          await jsm.streams.names().next()
          return
        } catch {
          await new Promise((r) => setTimeout(r, 50))
        }
      }
    }
  },
})
