import t from 'tap'
import { fileKvBuckets } from '../../storage/index.js'
import { kvLeaseContract } from '../contracts/kv-lease-contract.js'

kvLeaseContract(t, 'file', (dir, name, limits) => fileKvBuckets({ dir })(name, limits))
