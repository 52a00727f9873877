import { parsePublicKey } from '../../registry/index.js';
import { ApiError } from '../../schemas/api-error.js';
import { checkRegisterKey } from '../../schemas/control.js';
import { jsonRoute } from '../http/json-route.js';
import { ownedSource, parseBody, requireCreator } from './access.js';
/** Spec 3.1 and 5.3: register (pending), promote (after a test signal), revoke. */
export function registerKeyRoutes(parts) {
    const { registry } = parts;
    jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/keys', { access: 'any' }, async ({ principal, params, body }) => {
        requireCreator(principal);
        const source = ownedSource(registry, principal, params[0]);
        const input = parseBody(checkRegisterKey, body);
        const parsed = parsePublicKey(input.public_key);
        if (!parsed.ok)
            throw new ApiError('invalid_public_key', parsed.reason);
        return { status: 201, data: await registry.addKey(source.source_id, parsed.key) };
    });
    jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/keys', { access: 'any' }, ({ principal, params }) => {
        requireCreator(principal);
        const source = ownedSource(registry, principal, params[0]);
        return { status: 200, data: registry.keysOf(source.source_id), nextCursor: null };
    });
    jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/keys/:key_id/promote', { access: 'any' }, async ({ principal, params }) => {
        requireCreator(principal);
        const source = ownedSource(registry, principal, params[0]);
        return { status: 200, data: await registry.promoteKey(source.source_id, params[1]) };
    });
    jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/keys/:key_id/revoke', { access: 'any' }, async ({ principal, params }) => {
        requireCreator(principal);
        const source = ownedSource(registry, principal, params[0]);
        return { status: 200, data: await registry.revokeKey(source.source_id, params[1]) };
    });
}
//# sourceMappingURL=key-routes.js.map