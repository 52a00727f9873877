import { readFileSync, writeFileSync } from 'node:fs'
import { generateCreatorKeyPem, loadCreatorKey, type CreatorKey } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT, usageError } from './exit-codes.js'

/** A source's private key from a PEM file (or any form loadCreatorKey reads); a bad file is a usage error. */
export async function readKeyFile(path: string): Promise<CreatorKey> {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw usageError(`cannot read the key file ${path}: ${(err as Error).message}`)
  }
  try {
    return await loadCreatorKey(text)
  } catch (err) {
    throw usageError(`${path}: ${(err as Error).message}`)
  }
}

/**
 * A new Ed25519 key written as PKCS#8 PEM (what `openssl genpkey -algorithm ed25519`
 * writes), readable by its owner only (mode 600). An existing file is never overwritten:
 * it may be a key in use, and losing it loses the source's signing key.
 */
export async function writeNewKeyFile(path: string): Promise<CreatorKey> {
  const pem = generateCreatorKeyPem()
  try {
    writeFileSync(path, pem, { mode: 0o600, flag: 'wx' })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw usageError(`${path} exists: not overwritten (choose another file)`)
    throw new CliError(EXIT.usage, `cannot write ${path}: ${(err as Error).message}`)
  }
  return loadCreatorKey(pem)
}
