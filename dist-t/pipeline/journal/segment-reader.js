/**
 * Reads records across segments, from a seq or from a time. The per-segment summary
 * (first seq and time, last seq) picks the segment by binary search and the sparse
 * in-segment index picks the offset, so a read costs one short scan wherever it
 * starts in the log.
 */
import { open } from 'node:fs/promises';
import { ioError, LogError } from '../log-error.js';
import { indexSegment, prefixLength, scanRecords } from './segment-file.js';
/** Covers the gap to the start point (one index interval) plus typical records. */
const READ_CHUNK_BYTES = 128 * 1024;
export class SegmentReader {
    #segments;
    constructor(segments) {
        this.#segments = segments;
    }
    async read(start, max) {
        // A snapshot: a roll or a retention pass during the read does not disturb it.
        const segments = this.#segments().filter((s) => !s.empty);
        if (segments.length === 0)
            return [];
        const out = [];
        let i;
        let fromSeq = 0;
        let fromTime = 0;
        if ('fromSeq' in start) {
            // Like JetStream's opt_start_seq: a start before the first record held means
            // "from the first record held".
            fromSeq = Math.max(start.fromSeq, segments[0].firstSeq);
            i = indexOfLast(segments, (s) => s.firstSeq <= fromSeq);
        }
        else {
            fromTime = start.fromTime;
            // Times never decrease along the log, so the first record at or after
            // `fromTime` is in the last segment starting before it, or the next one.
            i = indexOfLast(segments, (s) => s.firstTime < fromTime);
        }
        for (; i < segments.length && out.length < max; i++) {
            const seg = segments[i];
            // Durable extent now; records made durable after this point wait for the next read.
            const to = seg.size;
            const lastSeq = seg.lastSeq;
            if (fromSeq > lastSeq)
                continue;
            const fh = await openSegment(seg);
            if (fh === undefined)
                continue; // removed by retention while this read ran
            try {
                const entry = await startEntry(fh, seg, out.length === 0 ? start : { fromSeq: seg.firstSeq }, fromSeq);
                const res = await scanRecords(fh, {
                    from: entry.offset,
                    to,
                    expectSeq: entry.seq,
                    copyData: true,
                    chunkBytes: READ_CHUNK_BYTES,
                    visit: (rec) => {
                        if (rec.seq < fromSeq || rec.time < fromTime)
                            return true;
                        out.push(rec);
                        return out.length < max;
                    },
                });
                if (res.problem !== undefined)
                    throw corrupt(seg, res.end, res.problem);
            }
            catch (err) {
                throw err instanceof LogError ? err : ioError(`reading ${seg.path}`, err);
            }
            finally {
                await fh.close().catch(() => undefined);
            }
        }
        return out;
    }
}
/** The index entry to begin scanning `seg` at, indexing the segment first if needed. */
async function startEntry(fh, seg, start, fromSeq) {
    const first = { seq: seg.firstSeq, time: seg.firstTime, offset: 0 };
    const wantsSeq = 'fromSeq' in start;
    // Reading a segment from its start needs no index.
    if (wantsSeq ? fromSeq <= seg.firstSeq : start.fromTime <= seg.firstTime)
        return first;
    if (seg.index === undefined) {
        seg.indexing ??= indexSegment(fh, seg).then((res) => {
            seg.indexing = undefined;
            if (res.problem !== undefined)
                throw corrupt(seg, res.end, res.problem);
        });
        await seg.indexing;
    }
    const entry = wantsSeq ? seg.entryForSeq(fromSeq) : seg.entryForTime(start.fromTime);
    return entry ?? first;
}
async function openSegment(seg) {
    try {
        return await open(seg.path, 'r');
    }
    catch (err) {
        if (err.code === 'ENOENT')
            return undefined;
        throw ioError(`opening ${seg.path}`, err);
    }
}
function corrupt(seg, offset, problem) {
    return new LogError('log_corrupt', `${seg.path} at byte ${offset}: ${problem}`);
}
/** Index of the last segment satisfying `pred` (a prefix property), or 0 if none. */
function indexOfLast(segments, pred) {
    return Math.max(prefixLength(segments, pred) - 1, 0);
}
//# sourceMappingURL=segment-reader.js.map