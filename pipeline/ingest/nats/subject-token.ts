import { createHash } from 'node:crypto'

/**
 * One NATS subject token (`[A-Za-z0-9_-]`, 22 characters, 132 bits of SHA-256) naming a
 * tuple of ids. Ids may hold any character, dots and wildcards included, so they never
 * go into a subject as they are. Each part is length-prefixed before hashing: two
 * tuples that join to the same string ('a\nb','c' and 'a','b\nc') get different tokens.
 * At 132 bits, two live tuples sharing a token is not a risk to design for.
 */
export function subjectToken(...parts: readonly string[]): string {
  const h = createHash('sha256')
  for (const part of parts) {
    const bytes = Buffer.from(part, 'utf8')
    h.update(`${bytes.length}:`)
    h.update(bytes)
  }
  return h.digest('base64url').slice(0, 22)
}
