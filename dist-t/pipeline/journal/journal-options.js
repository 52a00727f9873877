import { LogError } from '../log-error.js';
export const JOURNAL_DEFAULTS = {
    fsyncIntervalMs: 200,
    segmentBytes: 64 * 1024 * 1024,
    maxSegments: Number.POSITIVE_INFINITY,
};
/** Below this a segment would hold a handful of records and rolls would dominate. */
const MIN_SEGMENT_BYTES = 1024;
const KNOWN = new Set([
    'dir', 'fsync', 'fsyncIntervalMs', 'segmentBytes', 'dedupWindowMs', 'maxSegments', 'now',
]);
const POLICIES = ['always', 'interval', 'never'];
export function fillJournalOptions(opts) {
    if (typeof opts !== 'object' || opts === null)
        throw invalid('journal options must be an object');
    for (const key of Object.keys(opts)) {
        if (!KNOWN.has(key))
            throw invalid(`unknown journal option "${key}"; known: ${[...KNOWN].join(', ')}`);
    }
    if (typeof opts.dir !== 'string' || opts.dir === '') {
        throw invalid('journal option "dir" must name a folder (e.g. DATA_DIR/log)');
    }
    if (!POLICIES.includes(opts.fsync)) {
        throw invalid(`journal option "fsync" must be one of ${POLICIES.join(', ')}`);
    }
    const fsyncIntervalMs = opts.fsyncIntervalMs ?? JOURNAL_DEFAULTS.fsyncIntervalMs;
    if (!Number.isSafeInteger(fsyncIntervalMs) || fsyncIntervalMs < 1) {
        throw invalid('journal option "fsyncIntervalMs" must be a positive integer of milliseconds');
    }
    const segmentBytes = opts.segmentBytes ?? JOURNAL_DEFAULTS.segmentBytes;
    if (!Number.isSafeInteger(segmentBytes) || segmentBytes < MIN_SEGMENT_BYTES) {
        throw invalid(`journal option "segmentBytes" must be an integer of at least ${MIN_SEGMENT_BYTES}`);
    }
    if (!Number.isSafeInteger(opts.dedupWindowMs) || opts.dedupWindowMs < 0) {
        throw invalid('journal option "dedupWindowMs" must be a non-negative integer of milliseconds');
    }
    const maxSegments = opts.maxSegments ?? JOURNAL_DEFAULTS.maxSegments;
    if (maxSegments !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(maxSegments) || maxSegments < 1)) {
        throw invalid('journal option "maxSegments" must be a positive integer (leave it out for no limit)');
    }
    if (opts.now !== undefined && typeof opts.now !== 'function') {
        throw invalid('journal option "now" must be a function returning ms since the epoch');
    }
    return {
        dir: opts.dir,
        fsync: opts.fsync,
        fsyncIntervalMs,
        segmentBytes,
        dedupWindowMs: opts.dedupWindowMs,
        maxSegments,
        now: opts.now ?? Date.now,
    };
}
function invalid(message) {
    return new LogError('invalid_argument', message);
}
//# sourceMappingURL=journal-options.js.map