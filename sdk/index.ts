/**
 * The gateway's SDK (`@signal-ingest-gateway/sdk`, the package in this folder). For creators: load a source's Ed25519
 * key, onboard a source with the creator's token, push signed signals with retries. For
 * renters: read a rental's events (a resumed event stream, or polling), steer its webhook,
 * and verify a delivery (`v1a` Ed25519 or `v1` HMAC-SHA256). It runs on Node 20, in
 * browsers and in edge runtimes: it needs fetch, WebCrypto's getRandomValues and
 * TextEncoder, signs with WebCrypto's Ed25519 where present and @noble/ed25519 otherwise,
 * and imports nothing else (no node: modules; test/sdk/import-graph.test.ts checks).
 */
export { CreatorClient, type AddKeyInput, type CreatorClientOptions, type OnboardedSource, type OnboardSourceInput } from './creator-client.js'
export type { AgentView, IngestErrorView, KeyState, KeyView, Page, SignalView, SourceView } from './creator-api.js'
export { generateCreatorKeyPem, loadCreatorKey, type CreatorKey, type KeyInput, type LoadKeyOptions } from './creator-key.js'
export type { Ed25519Backend, Ed25519Signer } from './ed25519-signer.js'
export { CreatorApiError, GatewayApiError, GatewaySdkError, KeyFormatError, PushError, RenterApiError, type PushErrorDetails, type PushFailure } from './errors.js'
export { newNonce, sha256Hex, signingString, signRequest, type SignedRequest, type SignRequestInput } from './request-signing.js'
export { backoffMs, DEFAULT_RETRY, isRetryableStatus, nextDelayMs, retryAfterMs, type RetryOptions } from './retry-policy.js'
export { SourceClient, TimeoutError, type AcceptedSignal, type PushOptions, type RetryEvent, type SourceClientOptions } from './source-client.js'
export { RenterClient, type RenterClientOptions, type StreamOptions } from './renter-client.js'
export { RENTAL_ENDED, type RentalEvent, type RentalView, type StreamTicket } from './renter-api.js'
export { rentalEvents, type RentalStreamOptions } from './rental-event-stream.js'
export type { PollOptions } from './rental-poller.js'
export { SseParser, type SseMessage } from './sse-parser.js'
export {
  newWebhookSecret,
  signWebhookV1,
  verifyWebhook,
  WebhookVerificationError,
  type HeaderSource,
  type VerifiedWebhook,
  type VerifyWebhookOptions,
  type WebhookFailure,
  type WebhookKeys,
} from './webhook-signature.js'
export { verifyReceipt, ReceiptVerifyError, type ReceiptBundle, type ReceiptCheck, type ReceiptRequest, type VerifiedReceipt, type VerifyReceiptOptions } from './verify-receipt.js'
export { merkleLeafHash, merkleNodeHash, rootFromInclusionProof, verifyConsistency, verifyInclusion } from './merkle-proof.js'
export { NoteError, noteKeyId, openNote, parseCheckpointText, parseVerifierKey, verifyCheckpoint, type Checkpoint, type NoteSignature, type NoteVerifierKey, type OpenedNote } from './signed-note.js'
export {
  COMMITTED_FIELDS, commitment, committedBytes, decodeLeaf, encodeLeaf, LEAF_KIND, LEAF_VERSION, LeafFormatError, SALT_BYTES,
  type CommittedField, type CommittedValues, type DisputeLeaf, type OutcomeLeaf, type ReceiptLogLeaf, type SignalLeaf, type SignalLeafClear,
} from './receipt-leaf.js'
