import { mkdir, readFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { replaceFileDurably } from '../../storage/index.js'
import type { DeliveryKeyStorePort, StoredDeliveryKey } from './delivery-keys.js'

/** The delivery key ring in one JSON file (DATA_DIR/delivery-keys.json), readable by the service's user only. */
export function deliveryKeyFile(path: string): DeliveryKeyStorePort {
  return {
    async load() {
      let text: string
      try {
        text = await readFile(path, 'utf8')
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
        throw err
      }
      const doc = JSON.parse(text) as { keys?: StoredDeliveryKey[] }
      if (!Array.isArray(doc.keys)) throw new Error(`${path} holds no delivery keys; restore it or remove it to start a new ring`)
      return doc.keys
    },
    async save(keys) {
      await mkdir(dirname(path), { recursive: true })
      await replaceFileDurably(path, dirname(path), Buffer.from(JSON.stringify({ keys }, null, 1)), 0o600)
    },
  }
}
