import Type from 'typebox';
/** Spec section 6: emitted for a rental when a signal of the rented source is accepted. */
export const SignalAcceptedEvent = Type.Object({
    event: Type.Literal('byo.signal.accepted'),
    rental_id: Type.String(),
    source_id: Type.String(),
    signal_id: Type.String(),
    token: Type.String(),
    severity: Type.String({ description: 'a declared severity level' }),
    emitted_at: Type.String({ description: 'ISO 8601 UTC, the payload ts' }),
    received_at: Type.String({ description: 'ISO 8601 UTC arrival time' }),
}, { additionalProperties: false });
//# sourceMappingURL=events.js.map