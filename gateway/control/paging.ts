import { ApiError } from '../../schemas/api-error.js'

export interface Page<T> {
  readonly items: T[]
  /** The id of the page's last item when more follow, else null. */
  readonly nextCursor: string | null
}

/**
 * One page of `items` (in a stable order) after the item whose id is `cursor`. The
 * cursor is an id, not an offset, so a page stays right when records are added meanwhile;
 * a cursor naming no item is refused rather than read as the start.
 */
export function pageAfter<T>(items: readonly T[], idOf: (item: T) => string, cursor: string | null, limit: number): Page<T> {
  let start = 0
  if (cursor !== null) {
    const after = items.findIndex((item) => idOf(item) === cursor)
    if (after < 0) throw new ApiError('invalid_request', 'cursor is not one this endpoint returned')
    start = after + 1
  }
  const page = items.slice(start, start + limit)
  const last = page[page.length - 1]
  return { items: page, nextCursor: start + limit < items.length && last !== undefined ? idOf(last) : null }
}
