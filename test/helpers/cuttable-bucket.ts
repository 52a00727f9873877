import { KvError, type KvBucket, type KvWatcher } from '../../storage/index.js'

/**
 * The shared bucket as one process sees it: `cut()` is that process losing the storage
 * (a network partition, or a process frozen): every call fails with `unavailable` and its
 * watches end, while the other processes go on; `heal()` ends the partition (the watches
 * stay ended). A file bucket cannot be partitioned, so this stands in for it.
 */
export function cuttable(inner: KvBucket): KvBucket & { cut(): void; heal(): void } {
  let cut = false
  const watches: KvWatcher[] = []
  const guard = <T>(run: () => Promise<T>): Promise<T> => (cut ? Promise.reject(new KvError('unavailable', 'partitioned from the bucket')) : run())
  return {
    name: inner.name,
    get: (key) => guard(() => inner.get(key)),
    create: (key, value) => guard(() => inner.create(key, value)),
    update: (key, value, revision) => guard(() => inner.update(key, value, revision)),
    put: (key, value) => guard(() => inner.put(key, value)),
    delete: (key, options) => guard(() => inner.delete(key, options)),
    status: () => guard(() => inner.status()),
    close: async () => undefined,
    watch(options) {
      const w = inner.watch(options)
      watches.push(w)
      if (cut) w.stop()
      return w
    },
    cut() {
      cut = true
      for (const w of watches) w.stop()
    },
    heal() {
      cut = false
    },
  }
}
