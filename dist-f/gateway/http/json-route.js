import { parseStrictJson } from '../../pipeline/index.js';
import { ApiError } from '../../schemas/api-error.js';
import { bearerPrincipal } from './bearer.js';
import { collectFramingHeaders, framingProblem } from './framing.js';
import { Reply } from './reply.js';
import { nextRequestId } from './request-id.js';
/** Control-plane bodies are small documents; a manifest is the largest. */
export const MAX_CONTROL_BODY_BYTES = 64 * 1024;
/**
 * Registers one control-plane route: bearer authentication, a bounded strict-JSON
 * body, the success envelope, and errors as spec 2.4 bodies. A handler only returns
 * data or throws an ApiError; anything else thrown is logged and answered with 500.
 */
export function jsonRoute(parts, method, pattern, options, handler) {
    const paramCount = (pattern.match(/:/g) ?? []).length;
    parts.app[method](pattern, (res, req) => {
        const reply = new Reply(res, nextRequestId());
        parts.track(reply);
        const params = Array.from({ length: paramCount }, (_, i) => req.getParameter(i) ?? '');
        const query = new URLSearchParams(req.getQuery() ?? '');
        const authorization = req.getHeader('authorization');
        const framing = method === 'post' ? framingProblem(collectFramingHeaders(req), MAX_CONTROL_BODY_BYTES, { bodyRequired: false }) : undefined;
        const hasBody = method === 'post' && !['', '0'].includes(req.getHeader('content-length'));
        const path = req.getUrl();
        let role;
        // One line per control-plane request: they are rare, and they change what the gateway accepts.
        const logged = () => parts.logger.info({ request_id: reply.requestId, method: method.toUpperCase(), path, status: reply.status, role }, 'control request');
        const fail = (err, close = false) => {
            if (err instanceof ApiError) {
                reply.fail(err, close);
                return logged();
            }
            parts.logger.error({ request_id: reply.requestId, err }, 'control request failed');
            reply.fail(new ApiError('internal_error', 'internal error; retry later'), close);
            logged();
        };
        if (parts.isDraining())
            return fail(new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 }), true);
        const principal = bearerPrincipal(parts.registry, authorization);
        if (principal === undefined)
            return fail(new ApiError('unauthorized', 'a valid Authorization: Bearer <token> header is required'), true);
        role = principal.role;
        if (options.access === 'admin' && principal.role !== 'admin')
            return fail(new ApiError('forbidden', 'this endpoint needs the admin token'), true);
        const run = (body) => {
            Promise.resolve()
                .then(() => handler({ requestId: reply.requestId, principal, params, query, body }))
                .then((result) => {
                reply.send(result.status, result.nextCursor === undefined ? { ok: true, data: result.data } : { ok: true, data: result.data, next_cursor: result.nextCursor });
                logged();
            }, (err) => fail(err));
        };
        if (framing !== undefined)
            return fail(new ApiError(framing.kind === 'too_large' ? 'payload_too_large' : 'invalid_request', framing.message), true);
        if (!hasBody)
            return run(undefined);
        reply.onAbort = parts.bodies.read(res, MAX_CONTROL_BODY_BYTES, {
            onTimeout: () => fail(new ApiError('invalid_request', 'request body was not received in time'), true),
            onTooLarge: () => fail(new ApiError('payload_too_large', `body is larger than ${MAX_CONTROL_BODY_BYTES} bytes`), true),
            onBody: (raw) => {
                const parsed = parseStrictJson(raw);
                if (!parsed.ok)
                    return fail(new ApiError('invalid_request', `body is not valid JSON: ${parsed.reason}`));
                run(parsed.value);
            },
        });
    });
}
//# sourceMappingURL=json-route.js.map