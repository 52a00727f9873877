/**
 * What a creator signs: method, path, timestamp, nonce and body hash, joined by a line
 * feed, no trailing line feed; the last is the lowercase hex SHA-256 of the exact raw
 * body bytes.
 *
 * Its own file, free of imports, and exported on its own by the SDK package
 * (`@signal-ingest-gateway/sdk/signing-string`) because the gateway imports it too: one
 * definition for the signer and the verifier, and none of the SDK's code in the gateway's
 * ingest path.
 */
export function signingString(method: string, path: string, timestamp: string, nonce: string, bodySha256Hex: string): string {
  return `${method}\n${path}\n${timestamp}\n${nonce}\n${bodySha256Hex}`
}
