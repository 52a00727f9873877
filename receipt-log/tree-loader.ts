import { ReceiptLogError } from './log-error.js'
import type { CheckpointRow, ReceiptLogStore } from './log-store.js'
import { leafHash, type MerkleTree } from './merkle-tree.js'

/** Leaves read per query while a tree is loaded. */
const PAGE = 20_000

/**
 * Appends to `tree` the stored leaves after its last one, up to `upTo` leaves in all (all
 * there are without it). Returns the seq of the last leaf read (0 when none was).
 */
export async function loadLeaves(store: ReceiptLogStore, tree: MerkleTree, upTo = Number.MAX_SAFE_INTEGER): Promise<number> {
  let lastSeq = 0
  while (tree.size < upTo) {
    const rows = await store.entries(tree.size, Math.min(PAGE, upTo - tree.size))
    for (const r of rows) {
      // One insert per batch, and each lands whole: a gap means rows are missing.
      if (r.leaf_index !== tree.size) throw new ReceiptLogError('log_inconsistent', `receipt log: leaf ${tree.size} is missing from the store (found ${r.leaf_index})`)
      tree.appendHash(leafHash(Buffer.from(r.leaf, 'base64')))
      lastSeq = r.seq
    }
    if (rows.length < PAGE) break
  }
  return lastSeq
}

/** Refuses a tree that does not hash to a checkpoint already published: signing on would fork the log. */
export function checkAgainst(tree: MerkleTree, checkpoint: CheckpointRow): void {
  if (checkpoint.size > tree.size) throw new ReceiptLogError('log_inconsistent', `receipt log: the checkpoint of size ${checkpoint.size} was published but the store holds ${tree.size} leaves`)
  if (tree.root(checkpoint.size).toString('base64') !== checkpoint.root) throw new ReceiptLogError('log_inconsistent', `receipt log: the stored leaves do not hash to the published checkpoint of size ${checkpoint.size}`)
}
