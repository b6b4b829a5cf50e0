import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { createProcessRegistry, pingDb, pingRedis, PoolGauges, type Db, type ProcessPools, type RedisClient } from '@svc/core';

/** The error codes that mean a request's key was refused (spec §5): the auth-failure counter's only labels. */
const AUTH_FAILURE_CODES = new Set(['unauthorized', 'invalid_key', 'insufficient_scope']);
/** A scrape waits at most this long for each dependency's answer (as /readyz does). */
const DEPENDENCY_PING_MS = 1_000;

/**
 * The API's metrics on a registry of its own. Labels are route templates, methods, statuses and
 * error codes only: nothing names an account, a key, a URL or a secret.
 */
export class ApiMetrics {
  readonly registry: Registry;
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly duration: Histogram<'method' | 'route'>;
  private readonly rateLimited: Counter;
  private readonly authFailures: Counter<'code'>;
  private limiterFallback: () => boolean = () => false;
  private readonly pools: PoolGauges;
  private dependencies: { db: Db; redis: RedisClient } | undefined;

  constructor(registry: Registry = createProcessRegistry()) {
    this.registry = registry;
    this.requests = new Counter({
      name: 'svc_api_requests_total',
      help: 'API requests answered, by method, route template and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: 'svc_api_request_duration_seconds',
      help: 'Time from receiving a request to the end of its answer, by method and route template',
      labelNames: ['method', 'route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    this.rateLimited = new Counter({
      name: 'svc_api_rate_limited_requests_total',
      help: 'Requests refused with 429 rate_limited',
      registers: [registry],
    });
    this.authFailures = new Counter({
      name: 'svc_api_auth_failures_total',
      help: 'Requests refused for their key, by error code (unauthorized, invalid_key, insufficient_scope)',
      labelNames: ['code'],
      registers: [registry],
    });
    const metrics = this;
    new Gauge({
      name: 'svc_api_rate_limiter_fallback',
      help: '1 while the rate limiter counts per process because Redis does not answer, else 0',
      registers: [registry],
      collect() {
        this.set(metrics.limiterFallback() ? 1 : 0);
      },
    });
    this.pools = new PoolGauges(registry, 'svc_api');
    new Gauge({
      name: 'svc_api_dependency_up',
      help: '1 when the dependency (postgres, redis) answered this scrape’s ping within 1 s, as /readyz asks, else 0',
      labelNames: ['dependency'],
      registers: [registry],
      async collect() {
        const deps = metrics.dependencies;
        if (!deps) return;
        const [postgres, redis] = await Promise.all([pingDb(deps.db, DEPENDENCY_PING_MS), pingRedis(deps.redis, DEPENDENCY_PING_MS)]);
        this.set({ dependency: 'postgres' }, postgres ? 1 : 0);
        this.set({ dependency: 'redis' }, redis ? 1 : 0);
      },
    });
  }

  /** The pools the pool gauges read (createApp: the request pool and, when main.ts gives it, the operator pool). */
  watchPools(pools: ProcessPools): void {
    this.pools.watch(pools);
  }

  /** What the dependency gauge pings at scrape time: the pool and Redis connection /readyz pings. */
  watchDependencies(dependencies: { db: Db; redis: RedisClient }): void {
    this.dependencies = dependencies;
  }

  /** Where the fallback gauge reads the limiter's state (createApp wires its limiter). */
  watchLimiter(limiter: { readonly usingLocalFallback: boolean }): void {
    this.limiterFallback = () => limiter.usingLocalFallback;
  }

  requestFinished(method: string, route: string, status: number, seconds: number): void {
    this.requests.inc({ method, route, status: String(status) });
    this.duration.observe({ method, route }, seconds);
  }

  /** Called by the error middleware with each answered error's code. */
  errorAnswered(code: string): void {
    if (code === 'rate_limited') this.rateLimited.inc();
    else if (AUTH_FAILURE_CODES.has(code)) this.authFailures.inc({ code });
  }
}
