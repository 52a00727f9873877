/**
 * The receipt store's size bounds, in a file of their own so configuration can check
 * against them without loading the store.
 */

export const LIST_LIMIT_DEFAULT = 100
export const LIST_LIMIT_MAX = 1000
export const OUTCOMES_PER_POST_MAX = 1000
/** Receipts per record() call: one INSERT block, so a batch lands whole or not at all. */
export const RECORD_BATCH_MAX = 10_000
