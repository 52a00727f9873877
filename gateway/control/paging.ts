import { badCursor } from '../http/query.js'

export interface Page<T> {
  readonly items: T[]
  /** Names the page's last item (its id, and its time where items carry one) when more follow, else null. */
  readonly nextCursor: string | null
}

/**
 * One page of the `items` that `keep` selects, after the item the cursor names. The
 * cursor names an item, not an offset, so a page stays right when records are added
 * meanwhile. It is looked up among all the items, not only the selected ones, so it
 * still counts when its item stopped matching the filter in between (a token listed as
 * live and then revoked).
 *
 * With `timeOf` (a time that does not decrease along `items`), the cursor also carries
 * its item's time, so it still counts once its item is gone (a revoked token dropped
 * past the bound): the page starts at the first item of that millisecond, so items of it
 * listed before come again rather than one after it being skipped. A cursor naming no
 * item, and no time, is refused rather than read as the start.
 */
export function pageAfter<T>(
  items: Iterable<T>,
  idOf: (item: T) => string,
  cursor: string | undefined,
  limit: number,
  keep: (item: T) => boolean = () => true,
  timeOf?: (item: T) => number,
): Page<T> {
  const named = cursor === undefined ? undefined : parseCursor(cursor, timeOf !== undefined)
  const list = Array.isArray(items) ? (items as T[]) : [...items]
  let start = 0
  if (named !== undefined) {
    const at = list.findIndex((item) => idOf(item) === named.id)
    if (at >= 0) start = at + 1
    else if (named.time === undefined) throw badCursor()
    else {
      // The item is gone: start at its millisecond, so none after it is skipped.
      const time = named.time
      start = list.findIndex((item) => (timeOf as (item: T) => number)(item) >= time)
      if (start < 0) start = list.length
    }
  }
  const page: T[] = []
  let more = false
  for (let i = start; i < list.length; i++) {
    const item = list[i] as T
    if (!keep(item)) continue
    if (page.length === limit) {
      more = true
      break
    }
    page.push(item)
  }
  const last = page[page.length - 1]
  if (!more || last === undefined) return { items: page, nextCursor: null }
  return { items: page, nextCursor: timeOf === undefined ? idOf(last) : `${idOf(last)}.${timeOf(last)}` }
}

/** `id` or, where items carry a time, `id.time` (a bare id, as cursors were before, still reads). */
function parseCursor(cursor: string, timed: boolean): { id: string; time: number | undefined } {
  const dot = cursor.lastIndexOf('.')
  if (!timed || dot < 0) return { id: cursor, time: undefined }
  const time = Number(cursor.slice(dot + 1))
  // No id before the time (`.5`) names nothing, so it is no cursor of ours either.
  if (dot === 0 || !/^[0-9]{1,15}$/.test(cursor.slice(dot + 1)) || !Number.isSafeInteger(time)) throw badCursor()
  return { id: cursor.slice(0, dot), time }
}
