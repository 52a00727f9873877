/**
 * What a creator signs: method, path, timestamp, nonce and body hash, joined by a line
 * feed, no trailing line feed; the last is the lowercase hex SHA-256 of the exact raw
 * body bytes.
 *
 * Its own file, free of imports, because the creator SDK (sdk/) imports it as well as
 * the gateway: one definition for the signer and the verifier, and nothing else of
 * schemas/ (TypeBox, the OpenAPI document) in a creator's bundle.
 */
export function signingString(method: string, path: string, timestamp: string, nonce: string, bodySha256Hex: string): string {
  return `${method}\n${path}\n${timestamp}\n${nonce}\n${bodySha256Hex}`
}
