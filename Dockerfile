# The gateway's container image (docs/operations.md, "Containers and Kubernetes").
#   docker build -t signal-ingest-gateway .
# Two stages: the first installs every dependency and builds dist/ (TypeScript, the
# bundled entry, the SDK workspace), then drops the development dependencies; the second
# holds only what runs. Both on Debian bookworm: the native modules (uWebSockets.js,
# sodium-native, chDB) are built for glibc, and bookworm's 2.36 is what they are tested
# on; an Alpine (musl) image would not load them.

FROM node:20-bookworm AS build
WORKDIR /app
# The manifests first, so that a change of source alone reuses the installed layer.
COPY package.json package-lock.json ./
COPY sdk/package.json sdk/package.json
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json tsconfig.sdk.json tsconfig.test.json tsconfig.web.json ./
COPY scripts scripts
COPY backends backends
COPY bench bench
COPY cli cli
COPY config config
COPY delivery delivery
COPY gateway gateway
COPY harness harness
COPY migrate migrate
COPY pipeline pipeline
COPY receipt-log receipt-log
COPY receipts receipts
COPY recorder recorder
COPY registry registry
COPY rentals rentals
COPY schemas schemas
COPY sdk sdk
COPY service service
COPY storage storage
COPY tracing tracing
# The web pages' sources (the dashboard and the API reference), built into dist/web/.
COPY web web
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV PORT=8080 \
    HOST=0.0.0.0 \
    DATA_DIR=/var/lib/signal-ingest-gateway
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The workspace link node_modules/@signal-ingest-gateway/sdk points here.
COPY --from=build /app/sdk/package.json ./sdk/package.json
COPY --from=build /app/sdk/dist ./sdk/dist
# The image's own user (uid 1000 of the node images), never root; DATA_DIR is the only
# folder it writes. Mount a volume there: the journal, the registry and chDB live in it.
RUN mkdir -p /var/lib/signal-ingest-gateway && chown node:node /var/lib/signal-ingest-gateway
USER node
VOLUME ["/var/lib/signal-ingest-gateway"]
EXPOSE 8080
# Liveness only: /healthz answers as soon as the process listens; readiness is /readyz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM drains in-flight requests (SHUTDOWN_GRACE_MS); node runs as PID 1 and handles it itself.
STOPSIGNAL SIGTERM
# The V8 flags of config/node-flags.ts (why: see there).
CMD ["node", "--initial-old-space-size=128", "--min-semi-space-size=8", "--no-allocation-site-pretenuring", "dist/service/main.js"]
