import { ApiError } from '../../schemas/api-error.js'

export interface Page<T> {
  readonly items: T[]
  /** The id of the page's last item when more follow, else null. */
  readonly nextCursor: string | null
}

/**
 * One page of the `items` that `keep` selects, after the item whose id is `cursor`. The
 * cursor is an id, not an offset, so a page stays right when records are added
 * meanwhile. It is looked up among all the items, not only the selected ones, so it
 * still counts when its item stopped matching the filter in between (a token listed as
 * live and then revoked). A cursor naming no item is refused rather than read as the start.
 */
export function pageAfter<T>(
  items: Iterable<T>,
  idOf: (item: T) => string,
  cursor: string | null,
  limit: number,
  keep: (item: T) => boolean = () => true,
): Page<T> {
  const page: T[] = []
  let seeking = cursor !== null
  let more = false
  for (const item of items) {
    if (seeking) {
      seeking = idOf(item) !== cursor
      continue
    }
    if (!keep(item)) continue
    if (page.length === limit) {
      more = true
      break
    }
    page.push(item)
  }
  if (seeking) throw new ApiError('invalid_request', 'cursor is not one this endpoint returned')
  const last = page[page.length - 1]
  return { items: page, nextCursor: more && last !== undefined ? idOf(last) : null }
}
