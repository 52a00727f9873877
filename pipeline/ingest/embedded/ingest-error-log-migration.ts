/**
 * The ingest-error history as earlier versions kept it: signal-log segments (the embedded
 * journal's files) in the ingest-error folder, one ring shared by every source, each
 * record a refusal as JSON; the oldest records carry no number `n`. A shared ring let a
 * flood of refusals for one source push the others' off the disk, hence the current file
 * (refusal-file.ts). Read so that the first start of a newer version on an older data
 * folder keeps the refusals operators were shown and re-claims their nonces; once the
 * history is rewritten in the current form the segments are removed, and later starts
 * find none to read.
 */
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { unlinkIfPresent } from '../../../storage/index.js'
import { parseSegmentFileName } from '../../journal/segment-file.js'
import { openJournal } from '../../log-journal.js'
import { readBatches } from '../../log-reads.js'
import type { StoredRecord } from './ingest-error-log.js'

/** A record as the segments hold it. */
type LegacyRecord = Omit<StoredRecord, 'n'> & { readonly n?: number }

/**
 * Every record of the old segments in `dir`, in the order written, and the segments'
 * file names (none: nothing to read). A record without a number is given 0, which
 * IngestErrorLog numbers in the order it comes. All or nothing: a damaged segment or
 * record rejects, and the caller takes none of them.
 */
export async function readLegacySegments(dir: string): Promise<{ records: StoredRecord[]; segments: string[] }> {
  const segments = (await readdir(dir)).filter((n) => parseSegmentFileName(n) !== undefined)
  const records: StoredRecord[] = []
  if (segments.length === 0) return { records, segments }
  // No retention: the old history is read whole, whatever its age, and then removed.
  const log = await openJournal({ dir, fsync: 'never', dedupWindowMs: 0, maxAgeMs: Number.POSITIVE_INFINITY, maxBytes: Number.POSITIVE_INFINITY })
  try {
    for await (const batch of readBatches(log, { fromSeq: Math.max(1, (await log.info()).firstSeq) })) {
      for (const r of batch) {
        const stored = JSON.parse(Buffer.from(r.data).toString('utf8')) as LegacyRecord
        records.push({ ...stored, n: stored.n ?? 0 })
      }
    }
  } finally {
    await log.close()
  }
  return { records, segments }
}

/**
 * Removes the old segments, once their history is in the current file. Newest first: a
 * crash in between leaves the oldest, which read as the start of the history, as they are.
 */
export async function removeLegacySegments(dir: string, segments: readonly string[]): Promise<void> {
  const newestFirst = [...segments].sort((a, b) => (parseSegmentFileName(b) as number) - (parseSegmentFileName(a) as number))
  for (const name of newestFirst) await unlinkIfPresent(join(dir, name))
}
