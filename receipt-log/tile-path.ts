/**
 * C2SP tlog-tiles resource paths, relative to the log's prefix (`/v1/log/`):
 * `tile/<L>/<N>[.p/<W>]` for the hash tile of level L (tree level 8·L) and index N, and
 * `tile/entries/<N>[.p/<W>]` for the entry bundle N. N is written in groups of three
 * digits, every group but the last prefixed with `x` (1234067 → `x001/x234/067`); a
 * partial tile of W hashes or entries (1 to 255) carries `.p/<W>`, a full one (256) none.
 */

export const TILE_HEIGHT = 8
export const TILE_WIDTH = 256
/** Hash tile levels served: 0 to 5 reach 2^48 leaves, beyond any log this service keeps. */
export const MAX_TILE_LEVEL = 5

export type TilePath = { readonly kind: 'hash'; readonly level: number; readonly index: number; readonly width: number } | { readonly kind: 'entries'; readonly index: number; readonly width: number }

export function formatTileIndex(n: number): string {
  const groups: string[] = []
  do {
    groups.unshift(String(n % 1000).padStart(3, '0'))
    n = Math.floor(n / 1000)
  } while (n > 0)
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/')
}

export function formatTilePath(t: TilePath): string {
  const head = t.kind === 'entries' ? 'tile/entries' : `tile/${t.level}`
  return `${head}/${formatTileIndex(t.index)}${t.width === TILE_WIDTH ? '' : `.p/${t.width}`}`
}

/** Parses the part after `tile/`; undefined for anything the spec does not allow (no leading zeros beyond a group's three digits, W 1 to 255). */
export function parseTilePath(rest: string): TilePath | undefined {
  const segments = rest.split('/')
  const first = segments.shift()
  const kind = first === 'entries' ? 'entries' : /^[0-9]$/.test(first ?? '') ? 'hash' : undefined
  if (kind === undefined) return undefined
  const level = kind === 'hash' ? Number(first) : 0
  if (level > MAX_TILE_LEVEL) return undefined
  let width = TILE_WIDTH
  const last = segments.length >= 2 && segments[segments.length - 2]!.endsWith('.p') ? segments.pop() : undefined
  if (last !== undefined) {
    if (!/^[1-9][0-9]{0,2}$/.test(last) || Number(last) >= TILE_WIDTH) return undefined
    width = Number(last)
    segments[segments.length - 1] = segments[segments.length - 1]!.slice(0, -2)
  }
  if (segments.length === 0 || segments.length > 6) return undefined
  let index = 0
  for (let i = 0; i < segments.length; i++) {
    const g = segments[i]!
    const pattern = i < segments.length - 1 ? /^x[0-9]{3}$/ : /^[0-9]{3}$/
    if (!pattern.test(g)) return undefined
    index = index * 1000 + Number(i < segments.length - 1 ? g.slice(1) : g)
  }
  // The canonical form only: `x000/001` is not 1.
  if (formatTileIndex(index) !== segments.join('/')) return undefined
  return kind === 'hash' ? { kind, level, index, width } : { kind, index, width }
}
