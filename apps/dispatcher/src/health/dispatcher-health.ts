import { pingDb, pingRedis, type Db, type OperatorRoute, type Redis } from '@svc/core';

export interface Readiness {
  status: 'ready' | 'not_ready';
  checks: { postgres: 'ok' | 'down'; redis: 'ok' | 'down'; workers: 'running' | 'stopped' };
  /** Present when not ready: each failing check in words, as the API's /readyz gives them. */
  reasons?: string[];
}

/** Ready when PostgreSQL and Redis answer within 1 s and both workers are taking jobs. */
export async function checkReadiness(deps: { db: Db; redis: Redis; workersRunning: () => boolean }): Promise<Readiness> {
  const [postgres, redis] = await Promise.all([pingDb(deps.db), pingRedis(deps.redis)]);
  const workers = deps.workersRunning();
  const reasons = [
    ...(postgres ? [] : ['PostgreSQL does not answer']),
    ...(redis ? [] : ['Redis does not answer']),
    ...(workers ? [] : ['the workers are not running (not started, or shutting down)']),
  ];
  return {
    status: reasons.length === 0 ? 'ready' : 'not_ready',
    checks: { postgres: postgres ? 'ok' : 'down', redis: redis ? 'ok' : 'down', workers: workers ? 'running' : 'stopped' },
    ...(reasons.length === 0 ? {} : { reasons }),
  };
}

/** The dispatcher's /healthz and /readyz on its metrics port (it has no other HTTP port). */
export function healthRoutes(readiness: () => Promise<Readiness>): Record<string, OperatorRoute> {
  return {
    '/healthz': () => ({ status: 200, body: { status: 'ok' } }),
    '/readyz': async () => {
      const answer = await readiness();
      return { status: answer.status === 'ready' ? 200 : 503, body: answer };
    },
  };
}
