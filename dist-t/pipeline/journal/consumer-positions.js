/**
 * Durable consumer positions, kept in `consumers.json` beside the segments.
 *
 * The file is replaced atomically (temporary file, fsync, rename, fsync of the folder)
 * so a crash leaves either the old positions or the new ones. Acks arriving while a
 * write is under way are group-committed into the next write, so a busy consumer costs
 * one file replacement per batch, not per record.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { replaceFileDurably, unlinkIfPresent } from './durable-fs.js';
import { GroupCommit } from './group-commit.js';
import { ioError, LogError } from '../log-error.js';
const FILE = 'consumers.json';
const FORMAT_VERSION = 1;
export class ConsumerPositions {
    #dir;
    #path;
    /** Positions as last written to disk: what a restart would see. */
    #durable;
    #writes;
    constructor(dir, positions) {
        this.#dir = dir;
        this.#path = join(dir, FILE);
        this.#durable = positions;
        this.#writes = new GroupCommit({ commit: (acks) => this.#commit(acks) });
    }
    static async load(dir) {
        const path = join(dir, FILE);
        // A leftover temporary file is a replacement that never got renamed: the
        // previous file is still the truth.
        await unlinkIfPresent(`${path}.tmp`).catch((err) => {
            throw ioError('removing a stale consumers.json.tmp', err);
        });
        let text;
        try {
            text = await readFile(path, 'utf8');
        }
        catch (err) {
            if (err.code === 'ENOENT')
                return new ConsumerPositions(dir, new Map());
            throw ioError('reading consumers.json', err);
        }
        return new ConsumerPositions(dir, parsePositions(text, path));
    }
    get(name) {
        return this.#durable.get(name) ?? 0;
    }
    /** Resolves once a write including this position is durable. */
    set(name, seq) {
        return this.#writes.submit({ name, seq });
    }
    /** Waits for acks already submitted. */
    drain() {
        return this.#writes.drain();
    }
    async #commit(acks) {
        const next = new Map(this.#durable);
        for (const { name, seq } of acks) {
            // Positions only move forward: acks completed out of order by concurrent
            // workers must not move a consumer back and make it re-deliver.
            if (seq > (next.get(name) ?? 0))
                next.set(name, seq);
        }
        const body = { version: FORMAT_VERSION, consumers: Object.fromEntries(next) };
        try {
            await replaceFileDurably(this.#path, this.#dir, Buffer.from(`${JSON.stringify(body)}\n`));
        }
        catch (err) {
            throw ioError('writing consumers.json', err);
        }
        this.#durable = next;
    }
}
function parsePositions(text, path) {
    let parsed;
    try {
        parsed = JSON.parse(text);
    }
    catch (err) {
        throw new LogError('log_corrupt', `${path} is not valid JSON`, { cause: err });
    }
    const file = parsed;
    if (file === null ||
        typeof file !== 'object' ||
        file.version !== FORMAT_VERSION ||
        typeof file.consumers !== 'object' ||
        file.consumers === null) {
        throw new LogError('log_corrupt', `${path} does not hold version ${FORMAT_VERSION} consumer positions`);
    }
    const positions = new Map();
    for (const [name, seq] of Object.entries(file.consumers)) {
        if (!Number.isSafeInteger(seq) || seq < 0) {
            throw new LogError('log_corrupt', `${path}: position of ${JSON.stringify(name)} is not a sequence`);
        }
        positions.set(name, seq);
    }
    return positions;
}
//# sourceMappingURL=consumer-positions.js.map