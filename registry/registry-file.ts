import { mkdir, open, readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import type { RegistrySnapshot } from './records.js'
import type { RegistryStore } from './registry-store.js'

/**
 * The registry as one JSON file, replaced atomically: write a temporary file,
 * fsync it, rename it over the old one, fsync the folder. A `kill -9` at any point
 * leaves either the old or the new document, never a torn one. The registry changes
 * rarely (tokens, agents, sources, keys), so rewriting it whole is cheap.
 */
export class RegistryFile implements RegistryStore {
  readonly #path: string
  readonly #dir: string

  constructor(dir: string) {
    this.#dir = dir
    this.#path = join(dir, 'registry.json')
  }

  async load(): Promise<RegistrySnapshot | undefined> {
    let text: string
    try {
      text = await readFile(this.#path, 'utf8')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
      throw err
    }
    const snapshot = JSON.parse(text) as RegistrySnapshot
    if (snapshot.version !== 1) throw new Error(`${this.#path}: unknown registry version ${String(snapshot.version)}`)
    return snapshot
  }

  async save(snapshot: RegistrySnapshot): Promise<void> {
    await mkdir(this.#dir, { recursive: true })
    const tmp = `${this.#path}.tmp`
    const file = await open(tmp, 'w', 0o600)
    try {
      await file.writeFile(JSON.stringify(snapshot))
      await file.sync()
    } finally {
      await file.close()
    }
    await rename(tmp, this.#path)
    // The rename is durable only once the folder entry is synced.
    const dir = await open(this.#dir, 'r')
    try {
      await dir.sync()
    } finally {
      await dir.close()
    }
  }
}
