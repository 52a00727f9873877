import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { KvTicketStore } from '../../delivery/index.js'
import { ticketContract } from '../contracts/ticket-contract.js'
import { natsKvServer } from '../helpers/nats-kv.js'

/** Stream tickets on a NATS KV bucket pass the contract the memory and file-backed stores pass. */
const nats = await natsKvServer(t)

ticketContract(t, 'kv (nats)', async (t, maxTickets, bounds) => {
  const dir = await mkdtemp(join(tmpdir(), 'tickets-'))
  const open = nats.bucketsIn(dir)
  const bucket = await open('tickets', KvTicketStore.bucketLimits(maxTickets))
  const holdings = await open('ticket-holdings', KvTicketStore.holdingsLimits(maxTickets, bounds))
  t.teardown(async () => {
    await bucket.close()
    await holdings.close()
    await rm(dir, { recursive: true, force: true })
  })
  return KvTicketStore.open({ bucket, holdings, bounds })
})
