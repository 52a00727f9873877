import { isKvError, type KvBucket } from '../storage/index.js'
import { MigrationError } from './migration-error.js'

/** Entries written at once: enough to hide NATS's round trips, few enough to bound memory. */
const IN_FLIGHT = 64

export interface BucketCopy {
  /** Entries written into the cluster. */
  readonly copied: number
  /** Entries the cluster held already with the same value (a resumed move). */
  readonly present: number
  /** Entries left behind by `leaves`. */
  readonly left: number
}

/**
 * Copies every current value of `from` into `to`, each with a create-if-absent, so no
 * value of the cluster is ever overwritten: a key the cluster holds with the same bytes
 * counts as present (the copy ran before), with other bytes it stops the move with
 * `entry_differs`. Nothing writes to `from` meanwhile (the move holds DATA_DIR's lock).
 */
export async function copyBucket(from: KvBucket, to: KvBucket, leaves: (key: string) => boolean = () => false): Promise<BucketCopy> {
  const expected = (await from.status()).values
  let copied = 0
  let present = 0
  let left = 0
  let seen = 0
  const pending = new Set<Promise<void>>()
  let failure: unknown
  const write = async (key: string, value: Uint8Array) => {
    try {
      await to.create(key, value)
      copied++
    } catch (err) {
      if (!isKvError(err, 'exists')) throw err
      const held = await to.get(key)
      if (held === null || Buffer.compare(held.value, value) !== 0) {
        throw new MigrationError('entry_differs', `the cluster's bucket ${to.name} holds key ${key} with another value than the data folder's: it was written by something other than this move`)
      }
      present++
    }
  }
  if (expected > 0) {
    const watcher = from.watch({ include: 'last_values' })
    try {
      for await (const entry of watcher) {
        if (entry.isUpdate) break
        if (entry.operation === 'PUT' && leaves(entry.key)) left++
        else if (entry.operation === 'PUT') {
          const p: Promise<void> = write(entry.key, entry.value).catch((err: unknown) => void (failure ??= err)).finally(() => pending.delete(p))
          pending.add(p)
          if (pending.size >= IN_FLIGHT) await Promise.race(pending)
          if (failure !== undefined) break
        }
        if (++seen >= expected) break
      }
    } finally {
      watcher.stop()
    }
    await Promise.all(pending)
  }
  if (failure !== undefined) throw failure
  return { copied, present, left }
}
