import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createOperatorDb, createRedis, type Db } from '@svc/core';
import { holdConnections, scrapeSample, seedAccount, startTcpProxy, TEST_DATABASE_URL, TEST_REDIS_URL, waitFor, watchPool } from '@svc/core/testing';
import { ApiMetrics } from '../src/app.js';
import { bearer, createTestApi, waitForIdlePool, whenRedisReady, type TestApi } from './support.js';

const POOL_MAX = 3;

describe('the API’s pool and dependency gauges, wired as main.ts wires them (a request pool and an operator pool)', () => {
  let api: TestApi;
  let metrics: ApiMetrics;
  let probeDb: Db;

  beforeAll(async () => {
    metrics = new ApiMetrics();
    probeDb = createOperatorDb(TEST_DATABASE_URL, 'svc api operator port');
    api = createTestApi({ DB_POOL_MAX: String(POOL_MAX) }, { metrics, probeDb });
    await whenRedisReady(api.redis);
  });
  afterAll(async () => {
    await api.close();
    await probeDb.destroy();
  });

  const scrape = () => metrics.registry.metrics();
  const pool = (text: string, name: string, label: 'main' | 'operator') => scrapeSample(text, `svc_api_db_pool_${name}`, { pool: label });

  it('shows the connections a test holds in use and a request waiting for one, while Postgres is still up through the operator pool', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);
    await waitForIdlePool(api.db);
    const idle = await scrape();
    expect(pool(idle, 'connections_in_use', 'main')).toBe(0);
    expect(pool(idle, 'acquires_waiting', 'main')).toBe(0);
    expect(pool(idle, 'connections_max', 'main')).toBe(POOL_MAX);
    expect(pool(idle, 'connections_max', 'operator')).toBe(2);
    expect(scrapeSample(idle, 'svc_api_dependency_up', { dependency: 'postgres' })).toBe(1);
    expect(scrapeSample(idle, 'svc_api_dependency_up', { dependency: 'redis' })).toBe(1);

    const watched = watchPool(api.db);
    const held = await holdConnections(api.db, POOL_MAX);
    let answered: Promise<request.Response> | undefined;
    try {
      const holding = await scrape();
      expect(pool(holding, 'connections_in_use', 'main')).toBe(POOL_MAX);
      expect(pool(holding, 'acquires_waiting', 'main')).toBe(0);

      // A key the API has never seen is looked up in Postgres: the request waits for a connection.
      answered = Promise.resolve(request(api.app).get('/api/v1/sites').set(bearer(key)));
      const waiting = await waitFor(async () => {
        const text = await scrape();
        return (pool(text, 'acquires_waiting', 'main') ?? 0) >= 1 && text;
      }, 10_000, 'the request waiting for a connection');
      expect(pool(waiting, 'acquires_waiting', 'main')).toBe(watched.pending);
      expect(pool(waiting, 'connections_in_use', 'main')).toBe(POOL_MAX);
      expect(scrapeSample(waiting, 'svc_api_dependency_up', { dependency: 'postgres' })).toBe(1);
    } finally {
      held.release();
      watched.stop();
    }
    expect((await answered).status).toBe(200);
    await waitForIdlePool(api.db);
    expect(pool(await scrape(), 'acquires_waiting', 'main')).toBe(0);
  });

  it('reads Redis as down while its connection does not answer', async () => {
    const target = new URL(TEST_REDIS_URL);
    const proxy = await startTcpProxy(target.hostname, Number(target.port || 6379));
    const silentRedis = createRedis(`redis://127.0.0.1:${proxy.port}`, 'fast-fail');
    silentRedis.on('error', () => undefined);
    const degradedMetrics = new ApiMetrics();
    const degraded = createTestApi({}, { db: api.db, redis: silentRedis, metrics: degradedMetrics, probeDb });
    try {
      await whenRedisReady(silentRedis);
      expect(scrapeSample(await degradedMetrics.registry.metrics(), 'svc_api_dependency_up', { dependency: 'redis' })).toBe(1);
      proxy.blackhole();

      const text = await degradedMetrics.registry.metrics();

      expect(scrapeSample(text, 'svc_api_dependency_up', { dependency: 'redis' })).toBe(0);
      expect(scrapeSample(text, 'svc_api_dependency_up', { dependency: 'postgres' })).toBe(1);
    } finally {
      await degraded.close();
      silentRedis.disconnect();
      await proxy.close();
    }
  });
});
