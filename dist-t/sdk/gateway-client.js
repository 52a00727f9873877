import { signPush } from './signing.js';
/**
 * A small client for the gateway's HTTP API: JSON requests with a bearer token, signed
 * pushes, and the registration steps of spec section 1 in one call. The tests and the
 * benchmark use it; it is also the walk-through of the README as code.
 */
export class GatewayClient {
    baseUrl;
    constructor(baseUrl) {
        this.baseUrl = baseUrl.replace(/\/+$/, '');
    }
    async request(method, path, options = {}) {
        const headers = { ...options.headers };
        if (options.token !== undefined)
            headers['authorization'] = `Bearer ${options.token}`;
        let body = options.rawBody === undefined ? undefined : new Uint8Array(options.rawBody);
        if (options.body !== undefined) {
            body = JSON.stringify(options.body);
            headers['content-type'] ??= 'application/json';
        }
        const res = await fetch(this.baseUrl + path, { method, headers, body });
        const text = await res.text();
        return { status: res.status, headers: res.headers, body: (text === '' ? undefined : JSON.parse(text)) };
    }
    /** Sends a push built by `signPush`, byte for byte. */
    push(signed) {
        return this.request('POST', signed.path, { headers: signed.headers, rawBody: signed.body });
    }
    /** Creator token, agent, source, key (pending), test signal, promote: spec section 1, steps 1 to 5. */
    async onboardSource(o) {
        const expect = (step, res, status) => {
            if (res.status !== status)
                throw new Error(`${step}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
            return res;
        };
        const token = expect('creator token', await this.request('POST', '/v1/admin/tokens', { token: o.adminToken, body: { role: 'creator', subject: o.creatorId } }), 201);
        const creatorToken = token.body.data.token;
        expect('agent', await this.request('POST', '/v1/admin/agents', { token: o.adminToken, body: { agent_id: o.agentId, creator_id: o.creatorId, slots: o.slots } }), 201);
        const source = expect('source', await this.request('POST', '/v1/byo/sources', { token: creatorToken, body: { agent_id: o.agentId, manifest: o.manifest } }), 201);
        const sourceId = source.body.data.source_id;
        const key = expect('key', await this.request('POST', `/v1/byo/sources/${sourceId}/keys`, { token: creatorToken, body: { public_key: o.key.publicKeyBase64 } }), 201);
        const keyId = key.body.data.key_id;
        if (o.activate !== false) {
            const test = await this.push(signPush({ sourceId, keyId, key: o.key, payload: { ...o.testSignal, source_id: sourceId } }));
            if (test.status !== 202 || test.body.test !== true)
                throw new Error(`test signal: ${test.status} ${JSON.stringify(test.body)}`);
            expect('promote', await this.request('POST', `/v1/byo/sources/${sourceId}/keys/${keyId}/promote`, { token: creatorToken }), 200);
        }
        return { creatorToken, sourceId, keyId };
    }
}
//# sourceMappingURL=gateway-client.js.map