/**
 * Unsigned integers up to 2^53 (a JavaScript number's exact range) stored in 8 bytes,
 * little-endian: sequence numbers and millisecond times in the journal's records and
 * the signal-id history's files.
 */
export function writeUint53(buf: Buffer, offset: number, value: number): void {
  buf.writeUInt32LE(value % 0x1_0000_0000, offset)
  buf.writeUInt32LE(Math.floor(value / 0x1_0000_0000), offset + 4)
}

export function readUint53(buf: Buffer, offset: number): number {
  return buf.readUInt32LE(offset) + buf.readUInt32LE(offset + 4) * 0x1_0000_0000
}
