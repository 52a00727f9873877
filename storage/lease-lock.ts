import { KvLease, type LeaseLoss } from './kv-lease.js'
import type { KvBucket } from './kv-store.js'

export interface LeaseLockOptions {
  readonly bucket: KvBucket
  readonly key: string
  readonly holderId: string
  /** How long a dead holder keeps the lock (the lease time; renewed while held). */
  readonly leaseMs: number
  /** Called if the lock is lost while held (this process frozen past the lease time). */
  readonly onLost?: (loss: LeaseLoss) => void
  readonly onError?: (err: unknown) => void
}

/**
 * A lease of the key-value port used as a lock around one piece of work that one process
 * of the cluster at a time may do: waits as a standby until the key is free or its holder's
 * lease lapsed, then resolves with how to let the next one in (the release deletes the
 * key, so a waiting process goes on at once). A holder that dies holds the others up for
 * at most the lease time.
 */
export async function takeLeaseLock(options: LeaseLockOptions): Promise<() => Promise<void>> {
  const lease = new KvLease({
    bucket: options.bucket,
    key: options.key,
    holderId: options.holderId,
    leaseMs: options.leaseMs,
    ...(options.onLost !== undefined && { onLost: options.onLost }),
    ...(options.onError !== undefined && { onError: options.onError }),
  })
  try {
    await lease.acquire('wait')
  } catch (err) {
    await lease.release()
    throw err
  }
  return () => lease.release()
}
