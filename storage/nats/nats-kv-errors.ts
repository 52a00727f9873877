import { JetStreamApiCodes, JetStreamApiError, JetStreamError } from '@nats-io/jetstream'
import { ClosedConnectionError, ConnectionError, DrainingConnectionError, NoRespondersError, RequestError, TimeoutError } from '@nats-io/transport-node'
import { KvError } from '../kv-store.js'

/** The server's error codes the adapter answers differently from "unavailable". */
const MESSAGE_TOO_LARGE = 10054

/**
 * Turns what the NATS client throws into a KvError, here and nowhere else, by the
 * error's class and the server's numeric `err_code`, never by its text:
 * - `wrong last sequence` (10071): the expectation of a create, update or delete did not
 *   hold; `onWrongSequence` says which code that is for the operation.
 * - timeouts, no responders (JetStream not ready after a restart), a lost connection and
 *   any 503 (no stream leader during an election, a store that failed) are `unavailable`,
 *   transient. A write that timed out may still have been stored, or be stored once the
 *   client reconnects and flushes what it buffered: its fate is unknown, and only a new
 *   read (or a create / update by revision, which cannot apply twice) tells.
 * - a closed or draining connection is `closed`: the bucket cannot work on it any more.
 * - anything else is `io`, not transient: a refusal the adapter did not expect.
 */
export function toKvError(err: unknown, what: string, onWrongSequence?: 'exists' | 'wrong_revision'): KvError {
  if (err instanceof KvError) return err
  if (err instanceof JetStreamApiError) {
    if (err.code === JetStreamApiCodes.StreamWrongLastSequence && onWrongSequence !== undefined) {
      return new KvError(onWrongSequence, `${what}: ${onWrongSequence === 'exists' ? 'the key has a value' : 'the key is not at that revision'}`, { cause: err })
    }
    if (err.code === MESSAGE_TOO_LARGE) return new KvError('value_too_large', `${what}: the stream refused the value's size`, { cause: err })
    if (err.status === 503) return new KvError('unavailable', `${what}: JetStream cannot serve the bucket for now`, { cause: err })
    return new KvError('io', `${what}: JetStream refused (${err.code})`, { cause: err, transient: false })
  }
  if (err instanceof ClosedConnectionError || err instanceof DrainingConnectionError) {
    return new KvError('closed', `${what}: the NATS connection is closed`, { cause: err })
  }
  if (unreachable(err) || (err instanceof Error && unreachable(err.cause))) {
    return new KvError('unavailable', `${what}: NATS did not answer in time or cannot be reached`, { cause: err })
  }
  // The client's "jetstream is not enabled" wraps a no-responders RequestError (above);
  // its other JetStream errors are protocol trouble on a connection that may recover.
  if (err instanceof JetStreamError) return new KvError('unavailable', `${what}: JetStream failed`, { cause: err })
  return new KvError('io', `${what}: the NATS client failed`, { cause: err, transient: false })
}

/** The request got no answer: a timeout, no responders, a connection lost under it. */
function unreachable(err: unknown): boolean {
  return err instanceof TimeoutError || err instanceof NoRespondersError || err instanceof ConnectionError || err instanceof RequestError
}
