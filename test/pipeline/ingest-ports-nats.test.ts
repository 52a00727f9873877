import t from 'tap'
import { connect } from '@nats-io/transport-node'
import type { NatsConnection } from '@nats-io/transport-node'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { NatsNonceClaims } from '../../pipeline/ingest/nats/nonce-claims.js'
import { nonceClaimsContract } from '../contracts/nonce-claims-contract.js'

// The NATS adapters of the ingest ports, each run through its port's contract against a
// real nats-server. The two views a contract asks for are two gateways: two adapters on
// two separate connections, sharing nothing but the server.

// One server for the file (a missing nats-server fails here, with the install command).
const server = await startNatsServer()
const url = server.nodes[0]!.url
const connections: NatsConnection[] = []
t.teardown(async () => {
  for (const nc of connections) await nc.close()
  await server.close()
})

async function gateway(): Promise<NatsConnection> {
  const nc = await connect({ servers: url, reconnectTimeWait: 50, maxReconnectAttempts: -1 })
  connections.push(nc)
  return nc
}
const [ncA, ncB] = [await gateway(), await gateway()]

/** Each contract case gets its own streams and subjects. */
let cases = 0
const fresh = (kind: string) => `${kind}_${++cases}`

nonceClaimsContract(t, 'nats', async (_t, { windowMs }) => {
  const name = fresh('nonces')
  const options = { stream: name, subjectPrefix: `t.${name}`, windowMs, maxLiveNonces: 100_000 }
  return { a: await NatsNonceClaims.open({ nc: ncA, ...options }), b: await NatsNonceClaims.open({ nc: ncB, ...options }) }
})
