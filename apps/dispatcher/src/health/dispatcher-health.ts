import { pingDb, redisDownReason, redisHealth, type Db, type OperatorRoute, type RedisClient, type RedisClusterHealth } from '@svc/core';

export interface Readiness {
  status: 'ready' | 'not_ready';
  checks: { postgres: 'ok' | 'down'; redis: 'ok' | 'down'; workers: 'running' | 'stopped'; claims: 'progressing' | 'stalled' };
  /** On a Redis Cluster: its state and how many of its masters answered. */
  redisCluster?: RedisClusterHealth;
  /** Present when not ready: each failing check in words, as the API's /readyz gives them. */
  reasons?: string[];
}

/**
 * Ready when PostgreSQL and Redis answer within 1 s, both workers are taking jobs and no claim has
 * waited for its answer past the stall bound (`claimsStalledForMs`: 0 when none has). `db` is the
 * pool the ping goes through: the operator pool in main.ts, so a burst of probes never takes, nor
 * waits for, a connection deliveries need.
 */
export async function checkReadiness(deps: {
  db: Db;
  redis: RedisClient;
  workersRunning: () => boolean;
  claimsStalledForMs?: () => number;
}): Promise<Readiness> {
  const [postgres, health] = await Promise.all([pingDb(deps.db), redisHealth(deps.redis)]);
  const redis = health.ok;
  const workers = deps.workersRunning();
  const stalledMs = deps.claimsStalledForMs?.() ?? 0;
  const reasons = [
    ...(postgres ? [] : ['PostgreSQL does not answer']),
    ...(redis ? [] : [redisDownReason(health.cluster)]),
    ...(workers ? [] : ['the workers are not running (not started, or shutting down)']),
    ...(stalledMs > 0 ? [`a claim has waited ${Math.round(stalledMs / 1000)} s for Postgres: deliveries make no progress`] : []),
  ];
  return {
    status: reasons.length === 0 ? 'ready' : 'not_ready',
    checks: { postgres: postgres ? 'ok' : 'down', redis: redis ? 'ok' : 'down', workers: workers ? 'running' : 'stopped', claims: stalledMs > 0 ? 'stalled' : 'progressing' },
    ...(health.cluster ? { redisCluster: health.cluster } : {}),
    ...(reasons.length === 0 ? {} : { reasons }),
  };
}

/**
 * The dispatcher's /healthz and /readyz on its metrics port (it has no other HTTP port). Probes
 * that arrive while a readiness check runs share its answer: a burst of probes is one check.
 */
export function healthRoutes(readiness: () => Promise<Readiness>): Record<string, OperatorRoute> {
  let running: Promise<Readiness> | undefined;
  const shared = () =>
    (running ??= readiness().finally(() => {
      running = undefined;
    }));
  return {
    '/healthz': () => ({ status: 200, body: { status: 'ok' } }),
    '/readyz': async () => {
      const answer = await shared();
      return { status: answer.status === 'ready' ? 200 : 503, body: answer };
    },
  };
}
