/**
 * The journal's retention rule: how many of the oldest sealed segments go now.
 *
 * A segment goes whole, once every record in it is past the rule; its newest record's
 * time is known for segments indexed or written since open, and otherwise bounded by
 * the next segment's first time (times never decrease along the log), which keeps a
 * segment a little longer, never shorter.
 *
 * - by count (`maxSegments`, for best-effort logs only): always;
 * - by age (`maxAgeMs`): its newest record is older than that;
 * - by size (`maxBytes`): the segments held, this one included, exceed that, counting
 *   the active segment at its full `segmentBytes` (it fills before the next roll runs
 *   retention again, so the log stays within `maxBytes`);
 * - but age and size never remove a segment holding a record younger than
 *   `keepNewerThanMs` (what the ingest state reads back at start), nor one whose age is
 *   not known (the segment before an empty active one, after a crash during a roll).
 */
import type { FilledJournalOptions } from './journal-options.js'
import type { Segment } from './segment-file.js'
import type { RetentionRule } from './segment-writer.js'

type RetentionOptions = Pick<FilledJournalOptions, 'maxAgeMs' | 'maxBytes' | 'keepNewerThanMs' | 'maxSegments' | 'segmentBytes' | 'now'>

export function retentionRule(o: RetentionOptions): RetentionRule {
  return (segments) => {
    const now = o.now()
    let held = 0
    for (const seg of segments) held += seg.size
    held += Math.max(0, o.segmentBytes - segments[segments.length - 1]!.size)
    let n = 0
    for (; n < segments.length - 1; n++) {
      const seg = segments[n]!
      const byCount = segments.length - n > o.maxSegments
      if (!byCount) {
        const newest = newestTime(seg, segments[n + 1]!)
        if (Number.isNaN(newest) || now - newest < o.keepNewerThanMs) break
        const byAge = now - newest > o.maxAgeMs
        const bySize = held > o.maxBytes
        if (!byAge && !bySize) break
      }
      held -= seg.size
    }
    return n
  }
}

function newestTime(seg: Segment, next: Segment): number {
  if (!Number.isNaN(seg.lastTime)) return seg.lastTime
  return next.empty ? Number.NaN : next.firstTime
}
