import { readFile } from 'node:fs/promises'
import t from 'tap'
import { ConfigError, loadConfig } from '../../config/index.js'
import { repoPath } from '../helpers/repo-root.js'

/**
 * The configuration table of docs/operations.md lists every variable config/index.ts
 * declares, and no other, with its default and, for numbers and choices, its range as
 * the loader enforces it. The ranges are read from the loader's own refusals, so the
 * check holds whatever config/index.ts says next.
 */

interface Row {
  readonly defaultCell: string
  readonly rangeCell: string
}

async function configTable(): Promise<Map<string, Row>> {
  const page = await readFile(repoPath('docs/operations.md'), 'utf8')
  const section = /^## Configuration\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(page)?.[1] ?? ''
  const rows = new Map<string, Row>()
  for (const m of section.matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]*) \| ([^|]*) \|/gm)) {
    const [, name, defaultCell, rangeCell] = m as unknown as [string, string, string, string]
    if (rows.has(name)) throw new Error(`docs/operations.md lists ${name} twice`)
    rows.set(name, { defaultCell: defaultCell.trim(), rangeCell: rangeCell.trim() })
  }
  return rows
}

/** The loader's refusal of `value` for `name`: its message states the accepted range or choices. */
function refusal(name: string, value: string): string {
  try {
    loadConfig({ [name]: value })
  } catch (err) {
    if (err instanceof ConfigError) return err.message
    throw err
  }
  return ''
}

/** Digits as written in the docs, thousands separators dropped. */
const plain = (cell: string) => cell.replace(/(\d),(?=\d{3}\b)/g, '$1')

/** Where `n` stands in `text` as a whole number (not part of a longer one), or -1. */
function numberAt(text: string, n: number): number {
  return new RegExp(`(?<![0-9.])${n}(?![0-9])`).exec(text)?.index ?? -1
}

t.test('docs/operations.md, Configuration: every variable, its default and its range', async (t) => {
  const rows = await configTable()
  const defaults = loadConfig({}) as Record<string, unknown>
  t.ok(rows.size > 0, 'the section has a table of variables')
  t.same([...rows.keys()].sort(), Object.keys(defaults).sort(), 'the table names exactly the variables config/index.ts declares')

  for (const [name, value] of Object.entries(defaults)) {
    const row = rows.get(name)
    if (row === undefined) continue
    if (typeof value === 'number') {
      const range = /\((\d+) to (\d+)\)$/.exec(refusal(name, 'not-a-number'))
      t.ok(range, `${name}: the loader states its range`)
      if (range === null) continue
      const [min, max] = [Number(range[1]), Number(range[2])]
      t.not(numberAt(plain(row.defaultCell), value), -1, `${name}: the default cell shows ${value} (it says "${row.defaultCell}")`)
      const cell = plain(row.rangeCell)
      const [at, to] = [numberAt(cell, min), numberAt(cell, max)]
      t.ok(at >= 0 && to > at, `${name}: the range cell says ${min} to ${max} (it says "${row.rangeCell}")`)
      continue
    }
    const choices = /\(one of ([^)]+)\)$/.exec(refusal(name, 'not-one-of-them'))
    if (choices !== null) {
      t.ok(row.defaultCell.includes(String(value)), `${name}: the default cell shows ${String(value)}`)
      for (const choice of (choices[1] as string).split(', ')) {
        t.ok(row.rangeCell.includes(`\`${choice}\``), `${name}: the range cell lists \`${choice}\``)
      }
      continue
    }
    // Free text (an address, a path, a URL, a token): the default is shown, or said in words.
    t.ok(row.defaultCell.length > 0 && row.rangeCell.length > 0, `${name}: default and range cells are filled`)
    if (value !== '') t.ok(row.defaultCell.includes(String(value)), `${name}: the default cell shows ${String(value)}`)
  }
})
