import type { RegistrySnapshot } from './records.js'

/**
 * Where the registry keeps its state. The embedded adapter is a file in DATA_DIR
 * (`registry-file.ts`); a cluster adapter would be a NATS KV bucket.
 */
export interface RegistryStore {
  /** The last saved snapshot, or undefined for a new store. */
  load(): Promise<RegistrySnapshot | undefined>
  /** Durably replaces the snapshot; resolves only once it would survive a crash. */
  save(snapshot: RegistrySnapshot): Promise<void>
}
