import t from 'tap'
import { natsKvServer } from '../helpers/nats-kv.js'
import { kvContract } from '../contracts/kv-contract.js'

const nats = await natsKvServer(t)

kvContract(t, 'nats', (dir, name, limits) => nats.bucketsIn(dir)(name, limits))
