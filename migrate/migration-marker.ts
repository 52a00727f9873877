import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { replaceFileDurably } from '../storage/index.js'

/**
 * A file in the embedded data folder saying a move into a cluster began (`copying`) or
 * ended (`done`). `--resume` continues only a move that began and did not end, so a
 * resume never writes one deployment's state over another cluster's by mistake; a move
 * that ended is refused again (the cluster holds state by then anyway).
 */
export const MARKER_FILE = 'cluster-migration.json'

export interface MigrationMarker {
  readonly state: 'copying' | 'done'
  readonly started_at: string
  readonly nats_url: string
  readonly finished_at?: string
}

export async function readMarker(dataDir: string): Promise<MigrationMarker | undefined> {
  try {
    return JSON.parse(await readFile(join(dataDir, MARKER_FILE), 'utf8')) as MigrationMarker
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}

export async function writeMarker(dataDir: string, marker: MigrationMarker): Promise<void> {
  await replaceFileDurably(join(dataDir, MARKER_FILE), dataDir, Buffer.from(`${JSON.stringify(marker, null, 2)}\n`), 0o600)
}
