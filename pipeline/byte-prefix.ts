/** Whether `data` starts with `prefix`: how a marker record is told from a signal without parsing it. */
export function hasPrefix(data: Uint8Array, prefix: Uint8Array): boolean {
  if (data.byteLength < prefix.length) return false
  for (let i = 0; i < prefix.length; i++) if (data[i] !== prefix[i]) return false
  return true
}
