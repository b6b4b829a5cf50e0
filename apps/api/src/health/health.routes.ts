import { Router } from 'express';
import { pingDb, redisDownReason, redisHealth, type Db, type RedisClient, type RedisClusterHealth } from '@svc/core';
import type { SlidingWindowLimiter } from '../rate-limit/sliding-window-limiter.js';

const REDIS_PING_TIMEOUT_MS = 1_000;

/**
 * Contract §3: liveness and readiness, with no key and no rate limit. Ready means PostgreSQL
 * answers, Redis answers, and the rate limiter is shared through Redis (docs/api-behaviour.md:
 * a process on its per-process fallback lets N × the limit through, so it says 503 and why).
 */
export function healthRoutes(deps: { db: Db; redis: RedisClient; limiter: SlidingWindowLimiter }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [postgres, health, shared] = await Promise.all([
      pingDb(deps.db),
      redisHealth(deps.redis, REDIS_PING_TIMEOUT_MS),
      deps.limiter.probe(REDIS_PING_TIMEOUT_MS),
    ]);
    const redis = health.ok;
    const reasons = [
      ...(postgres ? [] : ['PostgreSQL does not answer']),
      ...(redis ? [] : [redisDownReason(health.cluster)]),
      ...(shared ? [] : ['the rate limiter runs on its per-process fallback: Redis does not run the shared rate-limit script']),
    ];
    const ready = reasons.length === 0;
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ready' : 'not_ready',
      checks: { postgres: postgres ? 'ok' : 'down', redis: redis ? 'ok' : 'down' },
      rateLimiter: shared ? 'shared' : 'per-process-fallback',
      ...(health.cluster ? { redisCluster: health.cluster } : {}),
      ...(ready ? {} : { reasons }),
    });
  });
  return router;
}
