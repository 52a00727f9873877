import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { fileKvBuckets } from '../../storage/index.js'
import { deliveryKeysContract } from '../contracts/delivery-keys-contract.js'

/** The delivery key ring on the file adapter (the embedded deployment's DATA_DIR/kv). */
deliveryKeysContract(t, 'file', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'delivery-keys-kv-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return fileKvBuckets({ dir })
})
