/**
 * Byte and text encodings with what every runtime has (btoa, atob, TextEncoder): the SDK
 * runs in browsers and edge runtimes, where Node's Buffer does not exist.
 */

const utf8 = new TextEncoder()

export const utf8Bytes = (text: string): Uint8Array => utf8.encode(text)

export function toBase64(bytes: Uint8Array): string {
  let binary = ''
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary)
}

/** Unpadded base64url (RFC 4648 section 5), as the gateway prints public keys. */
export const toBase64Url = (bytes: Uint8Array): string => toBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')

/** Standard or url-safe base64, padded or not; undefined when it is not base64. */
export function fromBase64(text: string): Uint8Array | undefined {
  const standard = text.replace(/-/g, '+').replace(/_/g, '/')
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(standard)) return undefined
  const unpadded = standard.replace(/=+$/, '')
  if (unpadded.length % 4 === 1) return undefined
  try {
    const binary = atob(unpadded + '='.repeat((4 - (unpadded.length % 4)) % 4))
    return Uint8Array.from(binary, (c) => c.charCodeAt(0))
  } catch {
    return undefined
  }
}

export function toHex(bytes: Uint8Array): string {
  let hex = ''
  for (const byte of bytes) hex += byte.toString(16).padStart(2, '0')
  return hex
}

/** Even-length hex, either case; undefined otherwise. */
export function fromHex(text: string): Uint8Array | undefined {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(text)) return undefined
  const bytes = new Uint8Array(text.length / 2)
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(text.slice(i * 2, i * 2 + 2), 16)
  return bytes
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}
