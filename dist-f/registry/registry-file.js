import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { replaceFileDurably } from '../pipeline/index.js';
/**
 * The registry as one JSON file, replaced atomically: write a temporary file,
 * fsync it, rename it over the old one, fsync the folder. A `kill -9` at any point
 * leaves either the old or the new document, never a torn one. The registry changes
 * rarely (tokens, agents, sources, keys), so rewriting it whole is cheap.
 */
export class RegistryFile {
    #path;
    #dir;
    constructor(dir) {
        this.#dir = dir;
        this.#path = join(dir, 'registry.json');
    }
    async load() {
        let text;
        try {
            text = await readFile(this.#path, 'utf8');
        }
        catch (err) {
            if (err.code === 'ENOENT')
                return undefined;
            throw err;
        }
        const snapshot = JSON.parse(text);
        if (snapshot.version !== 1)
            throw new Error(`${this.#path}: unknown registry version ${String(snapshot.version)}`);
        return snapshot;
    }
    async save(snapshot) {
        await mkdir(this.#dir, { recursive: true });
        // Mode 600: the file holds token hashes.
        await replaceFileDurably(this.#path, this.#dir, Buffer.from(JSON.stringify(snapshot)), 0o600);
    }
}
//# sourceMappingURL=registry-file.js.map