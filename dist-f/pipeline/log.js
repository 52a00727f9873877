/**
 * The signal log contract. Shaped by JetStream's semantics, not by the journal's
 * convenience, so that the embedded journal (`log-journal.ts`) and a JetStream
 * stream can stand behind the same interface:
 *
 * - `append` takes a dedup id (JetStream's `Nats-Msg-Id`); a second append with an id
 *   still inside the duplicate window returns the first record's sequence with
 *   `duplicate: true` and writes nothing.
 * - `append` resolves only once the record is durable under the configured fsync
 *   stance; a 202 is answered after that and never before.
 * - `read` reads from a sequence or from a point in time (JetStream's
 *   `opt_start_seq` / `opt_start_time`).
 * - Durable consumers keep an acknowledged position that survives restarts.
 */
export {};
//# sourceMappingURL=log.js.map