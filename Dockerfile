# The service's image: the release folder (`npm run release`) on Node.js 24 LTS, run as a non-root user.
#
#   docker build -t site-visibility-service .
#   docker run site-visibility-service                                      # the API (port 3000)
#   docker run site-visibility-service node apps/dispatcher/dist/src/main.js
#   docker run site-visibility-service node packages/core/dist/src/db/migrate.main.js
#   docker run site-visibility-service node apps/cli/bin/svc.js accounts create --name Acme --json
#
# Configure with the environment variables of README's Configuration table (DATABASE_URL,
# REDIS_URL, …). Node runs as PID 1 and handles SIGTERM itself: `docker stop` lets attempts in
# flight finish.
ARG NODE_IMAGE=node:24-bookworm-slim

# 1. Build: every workspace with its dev tools, then the release folder from it.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY . .
ARG SOURCE_COMMIT=""
# swagger-ui-dist's dependency @scarf/scarf reports installs from its postinstall: not from our builds.
ENV SCARF_ANALYTICS=false
RUN npm ci --no-audit --no-fund \
 && SOURCE_COMMIT="${SOURCE_COMMIT}" node scripts/release.mjs --out /release

# 2. Run: the release folder only (compiled code, migrations, production dependencies).
FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    METRICS_HOST=0.0.0.0
WORKDIR /app
# Owned by root and read-only to the user the service runs as.
COPY --from=build /release /app
USER node
# 3000: the API. 9464: the API's /metrics; 9465: the dispatcher's /metrics, /healthz and /readyz.
EXPOSE 3000 9464 9465
# Liveness of whichever process runs: the API's /healthz on PORT, the dispatcher's on its metrics
# port; a one-shot migration or svc command is always healthy (scripts/healthcheck.cjs).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 CMD ["node", "scripts/healthcheck.cjs"]
CMD ["node", "apps/api/dist/src/main.js"]
