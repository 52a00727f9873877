/**
 * Building the page from data. Text always goes in as text nodes (never innerHTML), so a
 * value from the API (a note, an error message) cannot become markup.
 */
type Child = Node | string | number | null | undefined | false

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string | boolean> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false) continue
    node.setAttribute(k, v === true ? '' : v)
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    node.append(typeof child === 'object' ? child : String(child))
  }
  return node
}

/** A table of `rows` under `columns` (header, cell of a row); `empty` when there is none. */
export function table<T>(id: string, columns: readonly [string, (row: T) => Child][], rows: readonly T[], empty: string): HTMLElement {
  if (rows.length === 0) return el('p', { id, class: 'empty' }, empty)
  return el(
    'table',
    { id },
    el('thead', {}, el('tr', {}, ...columns.map(([h]) => el('th', {}, h)))),
    el('tbody', {}, ...rows.map((row) => el('tr', {}, ...columns.map(([, cell]) => el('td', {}, cell(row)))))),
  )
}

/** A titled part of a view, whose body is replaced on each refresh. */
export function panel(id: string, title: string): { root: HTMLElement; body: HTMLElement; show(...nodes: Child[]): void } {
  const body = el('div', { class: 'panel-body' })
  const root = el('section', { id, class: 'panel' }, el('h2', {}, title), body)
  return {
    root,
    body,
    show(...nodes: Child[]) {
      body.replaceChildren(...nodes.filter((n): n is Node | string | number => n !== null && n !== undefined && n !== false).map((n) => (typeof n === 'object' ? n : String(n))))
    },
  }
}

/** What went wrong, in a panel: the API's code and message. */
export function errorNote(err: unknown): HTMLElement {
  const e = err as { code?: string; message?: string }
  return el('p', { class: 'error', role: 'alert' }, e.code === undefined ? String(e.message ?? err) : `${e.code}: ${e.message ?? ''}`)
}

export const when = (iso: string | null | undefined): string => (iso === null || iso === undefined ? '—' : new Date(iso).toLocaleString())
