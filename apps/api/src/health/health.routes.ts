import { Router } from 'express';
import { pingDb, pingRedis, type Db, type Redis } from '@svc/core';
import type { SlidingWindowLimiter } from '../rate-limit/sliding-window-limiter.js';

/** Contract §3: liveness and readiness, with no key and no rate limit. */
export function healthRoutes(deps: { db: Db; redis: Redis; limiter: SlidingWindowLimiter }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [postgres, redis] = await Promise.all([pingDb(deps.db), pingRedis(deps.redis)]);
    const ready = postgres && redis;
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ready' : 'not_ready',
      checks: { postgres: postgres ? 'ok' : 'down', redis: redis ? 'ok' : 'down' },
      rateLimiter: deps.limiter.usingLocalFallback || !redis ? 'per-process-fallback' : 'shared',
    });
  });
  return router;
}
