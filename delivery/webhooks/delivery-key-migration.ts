import { readFile, rename } from 'node:fs/promises'
import { dirname } from 'node:path'
import { syncDir, unlinkIfPresent } from '../../storage/index.js'
import { decodeRing, type DeliveryKeyRing } from './delivery-key-ring.js'

/**
 * Earlier versions kept the delivery key ring in DATA_DIR/delivery-keys.json (mode 600).
 * On the first start with the key-value bucket, that ring becomes the bucket's, so the
 * keys renters already verify with keep working; the file is then removed, the bucket
 * being the one place the ring lives.
 */

/** The ring the old file holds, or null if there is no file. Throws if it holds no ring: the operator must restore or remove it. */
export async function readLegacyRing(path: string): Promise<DeliveryKeyRing | null> {
  let bytes: Buffer
  try {
    bytes = await readFile(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
  const ring = decodeRing(bytes)
  if (ring === undefined) throw new Error(`${path} holds no delivery keys; restore it or remove it to start a new ring`)
  return ring
}

/**
 * Called once the bucket holds a ring. If it holds the old file's keys (this start
 * moved them, or an earlier start did and stopped before removing the file), the file
 * is deleted. If another process had already put a different ring there, the file's
 * keys are not used: it is renamed `<path>.unused` (still mode 600) rather than
 * deleted, so keys a renter may still hold are not destroyed unseen; `warn` says so.
 */
export async function retireLegacyFile(path: string, legacy: DeliveryKeyRing, ring: DeliveryKeyRing, warn: (message: string) => void): Promise<void> {
  const inBucket = new Set(ring.map((k) => k.key_id))
  if (legacy.some((k) => inBucket.has(k.key_id))) await unlinkIfPresent(path)
  else {
    await rename(path, `${path}.unused`)
    warn(`delivery keys: the bucket already held another ring, so the keys of ${path} are not used; it was renamed ${path}.unused (delete it once no renter verifies with its keys)`)
  }
  await syncDir(dirname(path))
}
