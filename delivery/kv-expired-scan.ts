import { isKvError, type KvBucket, type KvEntry } from '../storage/index.js'

/**
 * Deletes the keys under `key` (a prefix ending in `.>`) whose value `expiryOf` says
 * expired at `now`, each with the revision read, so a value written meanwhile is kept.
 * One pass over the bucket's current values, then the watch is stopped: for buckets
 * written too often for every process to follow each change (KvExpiringKeys does that),
 * and swept rarely. Holds the expired keys found, at most the bucket's maxKeys.
 */
export async function scanExpiredKeys(bucket: KvBucket, key: string, expiryOf: (entry: KvEntry) => number, now: number): Promise<number> {
  const expired: [key: string, revision: number][] = []
  const watcher = bucket.watch({ key })
  void watcher.initialized.then(() => watcher.stop())
  for await (const entry of watcher) {
    if (entry.operation === 'PUT' && expiryOf(entry) <= now) expired.push([entry.key, entry.revision])
  }
  let deleted = 0
  for (const [k, revision] of expired) {
    try {
      await bucket.delete(k, { revision })
      deleted++
    } catch (err) {
      // Written again meanwhile: in use, kept.
      if (!isKvError(err, 'wrong_revision')) throw err
    }
  }
  return deleted
}
