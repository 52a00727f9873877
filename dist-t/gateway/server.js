import { ApiError } from '../schemas/api-error.js';
import { openApiDocument } from '../schemas/openapi.js';
import { registerAdminRoutes } from './control/admin-routes.js';
import { registerIngestErrorsRoute } from './control/ingest-errors-route.js';
import { registerKeyRoutes } from './control/key-routes.js';
import { registerSourceRoutes } from './control/source-routes.js';
import { bearerPrincipal } from './http/bearer.js';
import { BodyReader } from './http/body-reader.js';
import { Reply } from './http/reply.js';
import { nextRequestId } from './http/request-id.js';
import { uws } from './http/uws.js';
import { ingestHandler } from './ingest-edge.js';
import { Metrics } from './metrics.js';
/** Starts the HTTP edge: ingest, control plane, health. */
export async function startGateway(options) {
    const app = uws.App();
    const bodies = new BodyReader(options.bodyTimeoutMs);
    const inFlight = new Set();
    let draining = false;
    let drained;
    const track = (reply) => {
        inFlight.add(reply);
        reply.onFinish = () => {
            inFlight.delete(reply);
            if (draining && inFlight.size === 0)
                drained?.();
        };
    };
    const isDraining = () => draining;
    const refusals = new Map();
    const metrics = new Metrics();
    const summary = setInterval(() => {
        if (refusals.size === 0)
            return;
        options.logger.info({ refusals: Object.fromEntries(refusals) }, 'ingest refusals in the last minute');
        refusals.clear();
    }, 60_000).unref();
    const parts = { app, registry: options.registry, bodies, logger: options.logger, isDraining, track };
    app.post('/v1/byo/sources/:source_id/signals', ingestHandler({
        registry: options.registry,
        pipeline: options.pipeline,
        pool: options.pool,
        errors: options.errors,
        bodies,
        logger: options.logger,
        now: Date.now,
        isDraining,
        track,
        refusals,
        metrics,
    }));
    registerAdminRoutes(parts);
    let baseUrl = options.publicBaseUrl;
    registerSourceRoutes(parts, () => baseUrl);
    registerKeyRoutes(parts);
    registerIngestErrorsRoute(parts, options.errors);
    app.get('/healthz', (res) => new Reply(res, nextRequestId()).send(200, { ok: true, data: { status: 'alive' } }));
    app.get('/readyz', (res) => {
        const reply = new Reply(res, nextRequestId());
        if (!draining && options.isReady())
            reply.send(200, { ok: true, data: { status: 'ready', verify_queue: options.pool.pending } });
        else
            reply.fail(new ApiError('not_ready', draining ? 'shutting down' : 'starting', { retryAfter: 1 }));
    });
    app.get('/metrics', (res, req) => {
        const reply = new Reply(res, nextRequestId());
        const principal = bearerPrincipal(options.registry, req.getHeader('authorization'));
        if (principal === undefined)
            return reply.fail(new ApiError('unauthorized', 'a valid Authorization: Bearer <token> header is required'));
        if (principal.role !== 'admin')
            return reply.fail(new ApiError('forbidden', 'this endpoint needs the admin token'));
        reply.sendText(200, 'text/plain; version=0.0.4', metrics.render({
            verifySlotsTaken: options.pool.pending,
            liveNonces: options.pipeline.liveNonces,
            dedupEntries: options.pipeline.dedupEntries,
            journalLastSeq: options.pipeline.logLastSeq,
            inFlightRequests: inFlight.size,
        }));
    });
    app.get('/v1/openapi.json', (res) => new Reply(res, nextRequestId()).send(200, openApiDocument(baseUrl)));
    app.any('/v1/byo/sources/:source_id/signals', (res) => new Reply(res, nextRequestId()).fail(new ApiError('method_not_allowed', 'use POST'), true));
    app.any('/*', (res) => new Reply(res, nextRequestId()).fail(new ApiError('not_found', 'no such endpoint'), true));
    const listenSocket = await new Promise((resolve, reject) => {
        app.listen(options.host, options.port, (socket) => (socket ? resolve(socket) : reject(new Error(`cannot listen on ${options.host}:${options.port}`))));
    });
    const port = uws.us_socket_local_port(listenSocket);
    if (baseUrl === '')
        baseUrl = `http://localhost:${port}`;
    let drainPromise;
    return {
        port,
        drain(graceMs) {
            drainPromise ??= (async () => {
                draining = true;
                uws.us_listen_socket_close(listenSocket);
                if (inFlight.size > 0) {
                    await new Promise((resolve) => {
                        drained = resolve;
                        setTimeout(resolve, graceMs).unref();
                    });
                }
                bodies.close();
                clearInterval(summary);
            })();
            return drainPromise;
        },
    };
}
//# sourceMappingURL=server.js.map