/** The receipt log's public entry: the tamper-evident Merkle log of receipts, its sequencer, its reader and its keys. */
export { ReceiptLogSequencer, type SequencerOptions, type SequencerStatus } from './sequencer.js'
export { ReceiptLogReader, type LoggedReceipt, type TileBody } from './log-reader.js'
export { ReceiptLogStore, type CheckpointRow, type KeySizes, type SignedRequestRow } from './log-store.js'
export { LogKeys, LogKeyLimitError, type PublishedLogKey } from './log-keys.js'
export { ReceiptLogError, type ReceiptLogErrorCode } from './log-error.js'
export { parseTilePath, formatTilePath, type TilePath } from './tile-path.js'
export { MerkleTree, leafHash, nodeHash } from './merkle-tree.js'
export { checkpointText, signNote, verifierKey, noteKeyId } from './signed-note.js'
