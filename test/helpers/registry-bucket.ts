import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Registry } from '../../registry/index.js'
import { fileKvBuckets, KvError, type KvBucket, type KvEntry, type KvWatcher, type KvWatchOptions, type OpenKvBucket } from '../../storage/index.js'

/**
 * The registry's tests run on a real bucket of the key-value port. They take the
 * adapter as an `OpenKvBucket`: the file adapter by default, another adapter (NATS KV)
 * by passing its opener.
 */
export type TapLike = { teardown(fn: () => unknown): void }

/**
 * The file adapter, in a throwaway folder removed at teardown: in /dev/shm where there is
 * one, where an fdatasync costs nothing, so the tests that make thousands of changes one
 * after another stay short (what survives a crash is the adapter's own test's concern).
 */
export async function fileRegistryBuckets(t: TapLike): Promise<OpenKvBucket> {
  const dir = await mkdtemp(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'sgw-registry-kv-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return fileKvBuckets({ dir })
}

/** A registry bucket of `open` (the file adapter by default), closed at teardown, wrapped in a TestBucket. */
export async function registryBucket(t: TapLike, open?: OpenKvBucket): Promise<TestBucket> {
  const opener = open ?? (await fileRegistryBuckets(t))
  const bucket = new TestBucket(await opener('registry', Registry.bucketLimits()))
  t.teardown(() => bucket.close())
  return bucket
}

/** A registry on `bucket` whose watch is stopped at teardown (before the bucket closes). */
export async function openRegistry(t: TapLike, bucket: KvBucket, adminToken = 'admin-secret', now?: () => number): Promise<Registry> {
  const registry = await Registry.open(bucket, adminToken, now === undefined ? {} : { now })
  t.teardown(() => registry.close())
  return registry
}

/**
 * A real bucket with faults a test can ask for: `failNext` fails the next write like a
 * full disk (nothing written), `hold` makes the next write wait for a promise and fail
 * if it rejects (nothing written either); `writes` counts the writes made.
 */
export class TestBucket implements KvBucket {
  readonly #inner: KvBucket
  failNext = false
  hold: Promise<void> | undefined
  writes = 0

  constructor(inner: KvBucket) {
    this.#inner = inner
  }

  get name(): string {
    return this.#inner.name
  }

  async #write<T>(write: () => Promise<T>): Promise<T> {
    if (this.failNext) {
      this.failNext = false
      throw new KvError('io', 'ENOSPC: no space left on device', { transient: true })
    }
    const hold = this.hold
    this.hold = undefined
    if (hold !== undefined) await hold
    const done = await write()
    this.writes++
    return done
  }

  get(key: string): Promise<KvEntry | null> {
    return this.#inner.get(key)
  }

  create(key: string, value: Uint8Array): Promise<number> {
    return this.#write(() => this.#inner.create(key, value))
  }

  update(key: string, value: Uint8Array, revision: number): Promise<number> {
    return this.#write(() => this.#inner.update(key, value, revision))
  }

  put(key: string, value: Uint8Array): Promise<number> {
    return this.#write(() => this.#inner.put(key, value))
  }

  delete(key: string, options?: { readonly revision?: number }): Promise<void> {
    return this.#write(() => this.#inner.delete(key, options))
  }

  watch(options?: KvWatchOptions): KvWatcher {
    return this.#inner.watch(options)
  }

  status() {
    return this.#inner.status()
  }

  close(): Promise<void> {
    return this.#inner.close()
  }
}

/** Every value the bucket holds, decoded from JSON, by key. */
export async function storedEntries(bucket: KvBucket): Promise<Map<string, any>> {
  const out = new Map<string, any>()
  const watcher = bucket.watch()
  const reading = (async () => {
    for await (const e of watcher) {
      if (e.isUpdate) break
      out.set(e.key, JSON.parse(new TextDecoder().decode(e.value)))
    }
  })()
  await watcher.initialized
  watcher.stop()
  await reading
  return out
}

/** The stored entry of a source (its record, keys and fingerprints). */
export async function storedSource(bucket: KvBucket, sourceId: string): Promise<any> {
  const entry = await bucket.get(`source.${sourceId}`)
  return entry === null ? undefined : JSON.parse(new TextDecoder().decode(entry.value))
}
