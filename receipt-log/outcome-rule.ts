import type { OutcomeItem } from '../pipeline/index.js'
import type { OutcomeLeaf } from '../sdk/receipt-leaf.js'

/**
 * Whether a posted verdict changes a receipt, given the receipt's last outcome leaf
 * (undefined while it has none): the rule that gives an outcome its leaf.
 *
 * A receipt's verdict is the one with the newest scored_at (the receipt store's rule), and
 * of two with the same scored_at, the one posted last; the log's "posted last" is later in
 * log order. So a verdict changes the receipt when it is the first, when its scored_at is
 * newer than the last leaf's, or when it has the same scored_at and differs from the last
 * leaf in anything (outcome, window or baseline). A re-post of the same verdict changes
 * nothing, and neither does a verdict older than the last leaf's.
 *
 * A newer scored_at with an unchanged outcome, window and baseline still gets a leaf: the
 * receipt's verdict is then that newer one, and keeping every leaf's verdict the receipt's
 * verdict at that point is what lets the last leaf alone decide the next (a verdict whose
 * scored_at lies between two never logged would otherwise be judged against the wrong one).
 * A verifier can check the rule from the leaves: per receipt, each outcome leaf's scored_at
 * is at least the one before it.
 */
export function outcomeChanges(last: OutcomeLeaf | undefined, next: OutcomeItem): boolean {
  if (last === undefined) return true
  const lastAt = Date.parse(last.scored_at)
  const nextAt = Date.parse(next.scored_at)
  if (nextAt !== lastAt) return nextAt > lastAt
  return next.outcome !== last.outcome || next.window_start !== last.window_start || next.window_end !== last.window_end || !Object.is(next.baseline, last.baseline)
}
