import { ReceiptLogError } from './log-error.js'
import type { CheckpointRow, ReceiptLogStore, SignedRequestRow } from './log-store.js'
import { leafHash, MerkleTree } from './merkle-tree.js'
import { TILE_HEIGHT, TILE_WIDTH, type TilePath } from './tile-path.js'
import { checkAgainst, loadLeaves } from './tree-loader.js'

/** A receipt's place in the log, as its proof route answers it. */
export interface LoggedReceipt {
  readonly leafIndex: number
  readonly leaf: Buffer
  readonly inclusionProof: readonly Buffer[]
  readonly checkpoint: string
  readonly request: SignedRequestRow
}

/** A static resource of the log: its bytes, and whether they can never change (a full tile). */
export interface TileBody {
  readonly bytes: Buffer
  readonly immutable: boolean
}

/**
 * The receipt log as a serving process reads it: a copy of the tree kept in memory up to
 * the latest persisted checkpoint, taken from the store at most every `maxAgeMs` when a
 * request comes (and at once when this process's sequencer signs one). Proofs, tiles and
 * consistency are then answered from memory; only a receipt's own row is read per proof.
 * A copy that does not hash to the checkpoint it loaded is never served.
 */
export class ReceiptLogReader {
  readonly #store: ReceiptLogStore
  readonly #maxAgeMs: number
  readonly #tree = new MerkleTree()
  #checkpoint: CheckpointRow | undefined
  #refreshedAt = Number.NEGATIVE_INFINITY
  #refreshing: Promise<void> | undefined

  constructor(store: ReceiptLogStore, maxAgeMs = 250) {
    this.#store = store
    this.#maxAgeMs = maxAgeMs
  }

  /** Takes a checkpoint this process has just persisted. */
  offer(checkpoint: CheckpointRow): void {
    if (checkpoint.size > (this.#checkpoint?.size ?? 0)) this.#refreshedAt = Number.NEGATIVE_INFINITY
  }

  /** The latest checkpoint, after a refresh if the copy is older than maxAgeMs; undefined before the first. */
  async latest(): Promise<CheckpointRow | undefined> {
    if (performance.now() - this.#refreshedAt >= this.#maxAgeMs) {
      this.#refreshing ??= this.#refresh().finally(() => (this.#refreshing = undefined))
      await this.#refreshing
    }
    return this.#checkpoint
  }

  async #refresh(): Promise<void> {
    const started = performance.now()
    const latest = await this.#store.latestCheckpoint()
    if (latest !== undefined && latest.size >= (this.#checkpoint?.size ?? 0)) {
      await loadLeaves(this.#store, this.#tree, latest.size)
      checkAgainst(this.#tree, latest)
      this.#checkpoint = latest
    }
    this.#refreshedAt = started
  }

  /** The receipt's leaf, proof and signed request; ReceiptLogError not_yet_logged until a checkpoint holds its leaf. Undefined for a test receipt, which has no leaf. */
  async proof(receiptId: string): Promise<LoggedReceipt | undefined> {
    const cp = await this.latest()
    const rows = await this.#store.requests([receiptId])
    if (rows.some((r) => r.test)) return undefined
    const size = cp?.size ?? 0
    const row = rows.find((r) => r.leaf_index !== null && r.leaf_index < size && this.#tree.leafHashAt(r.leaf_index).equals(leafHash(Buffer.from(r.leaf, 'base64'))))
    if (row === undefined || cp === undefined) throw new ReceiptLogError('not_yet_logged', 'the receipt is not in a checkpoint yet; retry in a second')
    const leafIndex = row.leaf_index as number
    return { leafIndex, leaf: Buffer.from(row.leaf, 'base64'), inclusionProof: this.#tree.inclusionProof(leafIndex, size), checkpoint: cp.note, request: row }
  }

  /** RFC 9162 consistency proof between two sizes no larger than the latest checkpoint's. */
  async consistency(from: number, to: number): Promise<Buffer[]> {
    const size = (await this.latest())?.size ?? 0
    if (to > size) throw new ReceiptLogError('unknown_size', `the latest checkpoint has size ${size}; no proof to ${to}`)
    return this.#tree.consistencyProof(from, to)
  }

  /**
   * A hash tile or entry bundle, within the latest checkpoint: a full tile once the tree
   * covers it, a partial one of exactly the width asked while the tree covers at least
   * that much (the spec lets a server answer a partial tile with a wider one; this one
   * answers exactly what was asked). Undefined when the tree does not reach it yet.
   */
  async tile(t: TilePath): Promise<TileBody | undefined> {
    await this.latest()
    const level = t.kind === 'hash' ? t.level * TILE_HEIGHT : 0
    const start = t.index * TILE_WIDTH
    const available = this.#tree.levelLength(level) - start
    if (available < t.width) return undefined
    if (t.kind === 'hash') return { bytes: this.#tree.levelSlice(level, start, t.width), immutable: t.width === TILE_WIDTH }
    const rows = await this.#store.entries(start, t.width)
    if (rows.length < t.width) return undefined
    const parts: Buffer[] = []
    for (const r of rows) {
      const leaf = Buffer.from(r.leaf, 'base64')
      const length = Buffer.alloc(2)
      length.writeUInt16BE(leaf.length)
      parts.push(length, leaf)
    }
    return { bytes: Buffer.concat(parts), immutable: t.width === TILE_WIDTH }
  }
}
