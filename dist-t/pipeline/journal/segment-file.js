/**
 * One segment file: `<20-digit first seq>.seg`, records back to back, no file header,
 * so the name alone tells where a segment starts and a sorted listing is seq order.
 */
import { join } from 'node:path';
import { decodeRecord, HEADER_BYTES, MAX_RECORD_BYTES } from './record-codec.js';
const NAME = /^(\d{20})\.seg$/;
/**
 * Spacing of the in-segment sparse index. A read starting mid-segment scans at most
 * this many bytes before its first record; 64 KiB costs ~1,000 entries per 64 MiB
 * segment, built only for segments that are actually read.
 */
export const INDEX_INTERVAL_BYTES = 64 * 1024;
/** Read size for whole-segment scans (recovery, indexing): few syscalls per segment. */
export const SCAN_CHUNK_BYTES = MAX_RECORD_BYTES;
export function segmentFileName(firstSeq) {
    return `${String(firstSeq).padStart(20, '0')}.seg`;
}
/** The first seq encoded in a segment file name, or undefined for other files. */
export function parseSegmentFileName(name) {
    const m = NAME.exec(name);
    if (m === null)
        return undefined;
    const seq = Number(m[1]);
    return Number.isSafeInteger(seq) && seq >= 1 ? seq : undefined;
}
/**
 * What the log knows about a segment. `size` and `lastSeq` only ever cover bytes that
 * are durable under the fsync policy, so readers never see a record that a crash could
 * still take back.
 */
export class Segment {
    firstSeq;
    path;
    /** Time of the first record; NaN while the segment is empty. */
    firstTime = Number.NaN;
    /** Time of the last record; NaN when empty or not scanned yet. */
    lastTime = Number.NaN;
    /** `firstSeq - 1` while empty. */
    lastSeq;
    size = 0;
    /** Sparse index; undefined for a sealed segment not scanned since open. */
    index;
    /** Shared by concurrent readers so a segment is scanned for its index once. */
    indexing;
    #nextIndexOffset = 0;
    constructor(dir, firstSeq) {
        this.firstSeq = firstSeq;
        this.lastSeq = firstSeq - 1;
        this.path = join(dir, segmentFileName(firstSeq));
    }
    get empty() {
        return this.lastSeq < this.firstSeq;
    }
    /** Accounts for one record made durable at `offset` (records arrive in order). */
    noteRecord(seq, time, offset, size) {
        if (this.empty)
            this.firstTime = time;
        this.lastSeq = seq;
        this.lastTime = time;
        this.size = offset + size;
        if (this.index !== undefined && offset >= this.#nextIndexOffset) {
            this.index.push({ seq, time, offset });
            this.#nextIndexOffset = offset + INDEX_INTERVAL_BYTES;
        }
    }
    /** For a segment the log writes to (or recovers): the index grows with each record. */
    beginIndex() {
        this.index = [];
        this.#nextIndexOffset = 0;
    }
    /** Installs an index built by a full scan, without exposing a half-built one. */
    setIndex(entries, lastTime, nextIndexOffset) {
        this.index = entries;
        this.lastTime = lastTime;
        this.#nextIndexOffset = nextIndexOffset;
    }
    /** The index entry to start a scan from for `seq`: the last one at or before it. */
    entryForSeq(seq) {
        return lastWhere(this.index ?? [], (e) => e.seq <= seq);
    }
    /**
     * The entry to start from for the first record with time >= `time`: the last one
     * strictly earlier, since equal times may begin before the entry.
     */
    entryForTime(time) {
        return lastWhere(this.index ?? [], (e) => e.time < time);
    }
}
/** Binary search: how many leading items satisfy `pred` (true for a prefix, then false). */
export function prefixLength(list, pred) {
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (pred(list[mid]))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
function lastWhere(list, pred) {
    const n = prefixLength(list, pred);
    return n === 0 ? undefined : list[n - 1];
}
/** Reads and validates records in `[from, to)`, in large chunks. */
export async function scanRecords(fh, opts) {
    const chunk = opts.chunkBytes ?? SCAN_CHUNK_BYTES;
    let buf = Buffer.allocUnsafe(Math.min(chunk, Math.max(HEADER_BYTES, opts.to - opts.from)));
    let pos = opts.from;
    let seq = opts.expectSeq;
    while (pos < opts.to) {
        const want = Math.min(buf.length, opts.to - pos);
        const { bytesRead } = await fh.read(buf, 0, want, pos);
        if (bytesRead === 0)
            return { end: pos, nextSeq: seq, problem: 'file shorter than expected', stopped: false };
        let off = 0;
        while (off < bytesRead) {
            const res = decodeRecord(buf, off, bytesRead, opts.copyData);
            if (res.kind === 'invalid') {
                return { end: pos + off, nextSeq: seq, problem: res.reason, stopped: false };
            }
            if (res.kind === 'incomplete') {
                if (pos + off + res.size > opts.to) {
                    return { end: pos + off, nextSeq: seq, problem: 'truncated record', stopped: false };
                }
                if (off === 0) {
                    // The file ended before `to`: treat like a truncated record.
                    if (bytesRead < want)
                        return { end: pos, nextSeq: seq, problem: 'truncated record', stopped: false };
                    // The record is larger than the buffer: grow it and read again from here.
                    buf = Buffer.allocUnsafe(Math.min(Math.max(res.size, buf.length * 2), MAX_RECORD_BYTES));
                }
                break;
            }
            if (res.record.seq !== seq) {
                return { end: pos + off, nextSeq: seq, problem: `expected seq ${seq}, found ${res.record.seq}`, stopped: false };
            }
            const keepGoing = opts.visit(res.record, pos + off, res.size);
            seq++;
            off += res.size;
            if (keepGoing === false)
                return { end: pos + off, nextSeq: seq, stopped: true };
        }
        pos += off;
    }
    return { end: pos, nextSeq: seq, stopped: false };
}
/**
 * Full scan of a sealed segment: rebuilds its sparse index and learns its last time.
 * The segment is trusted but the scan still validates framing, checksums and seqs;
 * the returned `problem` is set when it does not check out.
 */
export async function indexSegment(fh, segment, visit) {
    const entries = [];
    let nextIndexOffset = 0;
    let lastTime = Number.NaN;
    const res = await scanRecords(fh, {
        from: 0,
        to: segment.size,
        expectSeq: segment.firstSeq,
        copyData: false,
        visit: (record, offset) => {
            if (offset >= nextIndexOffset) {
                entries.push({ seq: record.seq, time: record.time, offset });
                nextIndexOffset = offset + INDEX_INTERVAL_BYTES;
            }
            lastTime = record.time;
            visit?.(record);
        },
    });
    if (res.problem === undefined && res.nextSeq !== segment.lastSeq + 1) {
        return { ...res, problem: `segment ends at seq ${res.nextSeq - 1}, expected ${segment.lastSeq}` };
    }
    if (res.problem === undefined)
        segment.setIndex(entries, lastTime, nextIndexOffset);
    return res;
}
//# sourceMappingURL=segment-file.js.map