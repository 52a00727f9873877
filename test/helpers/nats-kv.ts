import { basename } from 'node:path'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import type tap from 'tap'
import { startNatsServer, type NatsCluster } from '../../harness/nats-launcher.js'
import { natsKvBuckets, type NatsKvOptions, type OpenKvBucket } from '../../storage/index.js'

type Tap = typeof tap

export interface NatsKvServer {
  readonly server: NatsCluster
  /** A connection of its own ("a process"), closed at the end of the file. */
  connect(): Promise<NatsConnection>
  /** Buckets on the first connection whose names are prefixed by `dir`'s last part, so each throwaway folder gets its own. */
  bucketsIn(dir: string, options?: NatsKvOptions): OpenKvBucket
  /** Buckets on `nc`, prefixed the same way. */
  bucketsOn(nc: NatsConnection, dir: string, options?: NatsKvOptions): OpenKvBucket
}

/** A bucket name unique to a throwaway folder: its random suffix, then the name. */
export function bucketNameFor(dir: string, name: string): string {
  return `${basename(dir).replace(/[^A-Za-z0-9_-]/g, '_')}_${name}`
}

/**
 * One nats-server for a test file (started before its tests, killed after), and the
 * connections of the file. A missing nats-server fails the file.
 */
export async function natsKvServer(t: Tap): Promise<NatsKvServer> {
  const server = await startNatsServer()
  const connections: NatsConnection[] = []
  t.teardown(async () => {
    for (const nc of connections) await nc.close().catch(() => undefined)
    await server.close()
  })
  const open = async () => {
    // Reconnects quickly and forever: a test restarts the server under the connection.
    const nc = await connect({ servers: server.nodes[0]!.url, reconnectTimeWait: 50, maxReconnectAttempts: -1 })
    connections.push(nc)
    return nc
  }
  const first = await open()
  const bucketsOn = (nc: NatsConnection, dir: string, options?: NatsKvOptions): OpenKvBucket => (name, limits) => natsKvBuckets(nc, options)(bucketNameFor(dir, name), limits)
  return { server, connect: open, bucketsIn: (dir, options) => bucketsOn(first, dir, options), bucketsOn }
}
