import express, { Router, type Express } from 'express';
import { createSecretBox, type AuthenticatedKey, type Config, type Db, type Logger, type Queues, type RedisClient } from '@svc/core';
import { aiMonitorRoutes } from './ai-monitor/ai-monitor.routes.js';
import { authenticate, rateLimit } from './auth/authenticate.js';
import { KeyCache } from './auth/key-cache.js';
import { KeyLookupGate, keyLookupConcurrency } from './auth/key-lookup-gate.js';
import { KeyUsageTracker } from './auth/key-usage-tracker.js';
import { KnownKeys } from './auth/known-keys.js';
import { SharedKeyLookups } from './auth/shared-key-lookups.js';
import { UnknownKeyCache } from './auth/unknown-key-cache.js';
import { deliveriesRoutes } from './deliveries/deliveries.routes.js';
import { healthRoutes } from './health/health.routes.js';
import { errorHandler, notFound } from './http/error-handler.js';
import { requestContext } from './http/request-context.js';
import { ApiMetrics } from './metrics/api-metrics.js';
import { measureRequests } from './metrics/metrics-middleware.js';
import { RouteTemplates } from './metrics/route-templates.js';
import { docsRoutes } from './openapi/docs.routes.js';
import { openApiRoutes } from './openapi/openapi.routes.js';
import { SlidingWindowLimiter } from './rate-limit/sliding-window-limiter.js';
import { scansRoutes } from './scans/scans.routes.js';
import { settingsRoutes } from './settings/settings.routes.js';
import { sitesRoutes } from './sites/sites.routes.js';
import { webhooksRoutes } from './webhooks/webhooks.routes.js';

export { ApiMetrics, KeyCache, KnownKeys, UnknownKeyCache };

export interface AppDeps {
  config: Pick<Config, 'rateLimitPerMinute' | 'queuePrefix' | 'dbPoolMax' | 'secretsEncryptionKeys'> & Partial<Pick<Config, 'publicBaseUrl'>>;
  db: Db;
  /** A fast-failing connection (createRedis(url, 'fast-fail')): the limiter must not wait on an outage. */
  redis: RedisClient;
  queues: Pick<Queues, 'deliveries'>;
  logger: Logger;
  /** The key cache, when main.ts wires Postgres revocation notifications to it; else one of its own. */
  keyCache?: KeyCache;
  /** The metrics main.ts serves on METRICS_PORT; else a registry of this app's own. */
  metrics?: ApiMetrics;
  /** The negative cache, when main.ts wires Postgres key-creation notifications to it; else one of its own. */
  unknownKeyCache?: UnknownKeyCache;
  /** The operator pool (main.ts) /readyz pings through, so probes never take or wait for a request's connection; else `db`. */
  probeDb?: Db;
  /** The key filter, when main.ts feeds it Postgres key notifications: unknown keys are then refused with no query. */
  knownKeys?: KnownKeys;
  /** The key lookup lanes (never-seen keys, keys seen before); else two of a quarter of the pool each. */
  keyLookupGates?: { unseen: KeyLookupGate; seen: KeyLookupGate };
}

/**
 * Builds the API; it never listens (main.ts does), so tests drive it with supertest. Without
 * SECRETS_ENCRYPTION_KEY it warns, once, that webhook secrets are stored in plain text.
 */
export function createApp(deps: AppDeps): Express {
  const secrets = createSecretBox(deps.config.secretsEncryptionKeys, deps.logger);
  const limiter = new SlidingWindowLimiter({
    redis: deps.redis,
    limit: deps.config.rateLimitPerMinute,
    keyPrefix: deps.config.queuePrefix,
    logger: deps.logger,
  });
  const usage = new KeyUsageTracker(deps.db, deps.logger);
  const cache = deps.keyCache ?? new KeyCache();
  const metrics = deps.metrics ?? new ApiMetrics();
  metrics.watchLimiter(limiter);
  metrics.watchPools({ main: deps.db, ...(deps.probeDb ? { operator: deps.probeDb } : {}) });
  metrics.watchDependencies({ db: deps.probeDb ?? deps.db, redis: deps.redis });
  const unknown = deps.unknownKeyCache ?? new UnknownKeyCache();
  const gates = deps.keyLookupGates ?? {
    unseen: new KeyLookupGate(keyLookupConcurrency(deps.config.dbPoolMax)),
    seen: new KeyLookupGate(keyLookupConcurrency(deps.config.dbPoolMax)),
  };
  const shared = new SharedKeyLookups<AuthenticatedKey | undefined>();

  // One flat router for every /api/v1 route, in this order: a request walks one route list
  // instead of entering a router per resource (the profile had Express's router at a tenth of
  // the API's CPU on GET /webhooks, the fourth router it entered).
  const v1 = Router();
  v1.use(
    authenticate({ db: deps.db, cache, unknown, lookups: gates.unseen, revalidations: gates.seen, shared, ...(deps.knownKeys ? { known: deps.knownKeys } : {}) }),
    rateLimit({ limiter, cache, db: deps.db, usage }),
  );
  sitesRoutes({ db: deps.db }, v1);
  scansRoutes({ db: deps.db }, v1);
  aiMonitorRoutes({ db: deps.db }, v1);
  webhooksRoutes({ db: deps.db, queues: deps.queues, logger: deps.logger, secrets }, v1);
  deliveriesRoutes({ db: deps.db, queues: deps.queues, logger: deps.logger, secrets }, v1);

  const health = healthRoutes({ db: deps.probeDb ?? deps.db, redis: deps.redis, limiter });
  const description = [openApiRoutes(), docsRoutes()];
  const settings = settingsRoutes({
    db: deps.db,
    redis: deps.redis,
    queues: deps.queues,
    logger: deps.logger,
    secrets,
    queuePrefix: deps.config.queuePrefix,
    publicBaseUrl: deps.config.publicBaseUrl ?? 'http://localhost',
  });
  const routes = new RouteTemplates().add('', health).add('', description[0]!).add('', description[1]!).add('', settings).add('/api/v1', v1);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestContext(deps.logger));
  app.use(measureRequests(metrics, routes));
  // The API first: its requests need not pass the health and description routers (their paths
  // never start with /api/v1, so no request is answered differently).
  app.use('/api/v1', v1);
  app.use(health);
  app.use(description);
  app.use(settings);
  app.use(notFound);
  app.use(errorHandler(deps.logger, metrics));
  return app;
}
