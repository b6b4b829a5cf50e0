import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, createDb, createLogger, createRedis, type Db, type MetricsServer } from '@svc/core';
import { freePort, holdConnections, httpGet, scrapeSample, startTcpProxy, TEST_REDIS_URL, uniqueTag, waitFor, watchPool } from '@svc/core/testing';
import { createDispatcherDb } from '../src/dispatcher-db.js';
import { DispatcherMetrics } from '../src/metrics/dispatcher-metrics.js';
import { createOperatorSide, serveOperatorPort, type OperatorSide } from '../src/operator-port.js';
import { producerOf } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

const POOL_MAX = 2;

describe('a dispatcher wired as main.ts wires it, whose delivery pool is busy to its last connection', () => {
  let h: Harness;
  let db: Db;
  let operator: OperatorSide;
  let server: MetricsServer;

  beforeAll(async () => {
    h = await createHarness();
    db = createDispatcherDb(h.config.databaseUrl, POOL_MAX);
    operator = createOperatorSide(h.config.databaseUrl);
    const dispatcher = h.startDispatcher({}, { db, operator });
    server = await serveOperatorPort(dispatcher, { port: await freePort(), host: '127.0.0.1', logger: createLogger('error', { silent: true }) });
  });
  afterAll(async () => {
    await server.close();
    await h.close();
    await operator.close();
    await db.destroy();
  });

  async function scrape(): Promise<string> {
    const res = await httpGet(`http://127.0.0.1:${server.port}/metrics`);
    expect(res.status).toBe(200);
    return res.text;
  }
  const pool = (text: string, name: string, label: 'main' | 'operator') => scrapeSample(text, `svc_dispatcher_db_pool_${name}`, { pool: label });

  it('shows the connections a test holds in use, the claims waiting for one, and Postgres still up through the operator pool', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/pool-${uniqueTag()}`;
    await tenant.subscribe(path, ['ai_check.completed']);
    const idle = await scrape();
    expect(pool(idle, 'connections_max', 'main')).toBe(POOL_MAX);
    expect(pool(idle, 'connections_max', 'operator')).toBe(2);
    expect(pool(idle, 'connections_in_use', 'main')).toEqual(expect.any(Number));
    expect(scrapeSample(idle, 'svc_dispatcher_dependency_up', { dependency: 'postgres' })).toBe(1);
    expect(scrapeSample(idle, 'svc_dispatcher_dependency_up', { dependency: 'redis' })).toBe(1);
    expect(scrapeSample(idle, 'svc_dispatcher_claims_stalled_seconds')).toBe(0);

    const watched = watchPool(db);
    const held = await holdConnections(db, POOL_MAX);
    let busy: string;
    try {
      await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 7 });
      busy = await waitFor(async () => {
        const text = await scrape();
        return (pool(text, 'acquires_waiting', 'main') ?? 0) >= 1 && (scrapeSample(text, 'svc_dispatcher_claims_stalled_seconds') ?? 0) >= 1 && text;
      }, 15_000, 'queries waiting for the held pool, and claims stalled a second');
      expect(pool(busy, 'connections_in_use', 'main')).toBe(POOL_MAX);
      expect(pool(busy, 'connections_in_use', 'main')).toBe(watched.used);
      expect(scrapeSample(busy, 'svc_dispatcher_dependency_up', { dependency: 'postgres' })).toBe(1);
      expect(h.receiver.to(path)).toHaveLength(0);
    } finally {
      held.release();
      watched.stop();
    }

    await waitFor(() => h.receiver.to(path).length === 1, 15_000, 'the delivery once the connections are released');
    const after = await waitFor(async () => {
      const text = await scrape();
      return pool(text, 'acquires_waiting', 'main') === 0 && scrapeSample(text, 'svc_dispatcher_claims_stalled_seconds') === 0 && text;
    }, 10_000, 'nothing waiting any more');
    expect(pool(after, 'connections_in_use', 'main')).toBeLessThanOrEqual(POOL_MAX);
  });
});

describe('the dependency gauge while PostgreSQL or Redis does not answer', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it('reads 0 for the one that does not answer and 1 for the other', async () => {
    // A Redis whose connection went silent (a firewall that forgot it), and a PostgreSQL no one listens for.
    const target = new URL(TEST_REDIS_URL);
    const proxy = await startTcpProxy(target.hostname, Number(target.port || 6379));
    const unreachableRedis = createRedis(`redis://127.0.0.1:${proxy.port}`, 'fast-fail');
    unreachableRedis.on('error', () => undefined);
    await waitFor(() => unreachableRedis.status === 'ready', 5_000, 'the proxied Redis connection');
    proxy.blackhole();
    const unreachableDb = createDb('postgres://postgres@127.0.0.1:1/svc_nowhere', { poolMax: 1, log: () => undefined });
    try {
      const redisDown = new DispatcherMetrics();
      redisDown.watch({ queues: h.queues, db: h.db, redis: unreachableRedis });
      const postgresDown = new DispatcherMetrics(undefined, { db: unreachableDb });
      postgresDown.watch({ queues: h.queues, db: h.db, redis: h.redis });

      const noRedis = await redisDown.registry.metrics();
      const noPostgres = await postgresDown.registry.metrics();

      expect(scrapeSample(noRedis, 'svc_dispatcher_dependency_up', { dependency: 'redis' })).toBe(0);
      expect(scrapeSample(noRedis, 'svc_dispatcher_dependency_up', { dependency: 'postgres' })).toBe(1);
      expect(scrapeSample(noPostgres, 'svc_dispatcher_dependency_up', { dependency: 'postgres' })).toBe(0);
      expect(scrapeSample(noPostgres, 'svc_dispatcher_dependency_up', { dependency: 'redis' })).toBe(1);
    } finally {
      unreachableRedis.disconnect();
      await proxy.close();
      await unreachableDb.destroy();
    }
  });
});
