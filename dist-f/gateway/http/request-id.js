import { randomBytes } from 'node:crypto';
/**
 * Request ids: a random per-process prefix and a counter. Unique across restarts
 * and processes without a random draw per request on the hot path.
 */
const prefix = `req_${randomBytes(6).toString('base64url')}`;
let counter = 0;
export function nextRequestId() {
    counter++;
    return `${prefix}${counter.toString(36).padStart(6, '0')}`;
}
//# sourceMappingURL=request-id.js.map