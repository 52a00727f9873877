import { checkCreateAgent, checkCreateToken } from '../../schemas/control.js';
import { jsonRoute } from '../http/json-route.js';
import { parseBody } from './access.js';
/** Tokens and agents: issued by the operator (the admin token). */
export function registerAdminRoutes(parts) {
    const { registry } = parts;
    jsonRoute(parts, 'post', '/v1/admin/tokens', { access: 'admin' }, async ({ body }) => {
        const input = parseBody(checkCreateToken, body);
        const { token, record } = await registry.createToken(input.role, input.subject);
        // The token is shown once; only its hash is kept.
        return { status: 201, data: { token, token_id: record.token_id, role: record.role, subject: record.subject, created_at: record.created_at } };
    });
    jsonRoute(parts, 'post', '/v1/admin/agents', { access: 'admin' }, async ({ body }) => {
        const agent = await registry.createAgent(parseBody(checkCreateAgent, body));
        return { status: 201, data: agent };
    });
}
//# sourceMappingURL=admin-routes.js.map