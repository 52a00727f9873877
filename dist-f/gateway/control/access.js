import { ApiError } from '../../schemas/api-error.js';
/**
 * The source if `principal` operates it (its creator) or is the admin. Anyone else
 * gets the same 404 as for a source that does not exist, so ids cannot be probed.
 */
export function ownedSource(registry, principal, sourceId) {
    const source = registry.source(sourceId);
    if (source !== undefined && (principal.role === 'admin' || (principal.role === 'creator' && principal.subject === source.creator_id))) {
        return source;
    }
    throw new ApiError('not_found', 'no such source');
}
/** Source routes are for the source's creator and the admin; a renter token gets 403 on all of them. */
export function requireCreator(principal) {
    if (principal.role === 'renter')
        throw new ApiError('forbidden', 'this endpoint is for creators');
}
export function parseBody(check, body) {
    const result = check(body ?? {});
    if (!result.ok)
        throw new ApiError('invalid_request', result.problem);
    return result.value;
}
//# sourceMappingURL=access.js.map