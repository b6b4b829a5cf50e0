import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createRedis, type Redis } from '@svc/core';
import { seedAccount } from '@svc/core/testing';
import { startPrivateRedis, type PrivateRedis } from './private-redis.js';
import { bearer, createTestApi, whenRedisReady, type TestApi } from './support.js';

// A Redis that answers PING but refuses writes (an old primary demoted to a read-only replica by a
// failover): the limiter's script fails, so the API limits per process while a PING-only
// readiness check says all is well.
describe('Readiness while Redis answers PING but refuses the rate-limit script', () => {
  let redis: PrivateRedis;
  let limiterRedis: Redis;
  let api: TestApi;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    limiterRedis = createRedis(redis.url, 'fast-fail');
    limiterRedis.on('error', () => undefined);
    await whenRedisReady(limiterRedis);
    api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' }, { redis: limiterRedis });
  });
  afterAll(async () => {
    await api.close();
    limiterRedis.disconnect();
    await redis.stop();
  });

  it('answers 200 ready while the shared limiter works', async () => {
    const res = await request(api.app).get('/readyz');

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' }, rateLimiter: 'shared' });
  });

  it('answers 503 with the reason once requests are limited per process, though PING still answers', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);
    // A replica of a primary that is not there: read-only, still answering PING.
    await redis.admin.replicaof('127.0.0.1', 1);
    try {
      const served = await request(api.app).get('/api/v1/webhooks').set(bearer(key));
      const ping = await limiterRedis.ping();

      const res = await request(api.app).get('/readyz');

      expect(served.status).toBe(200); // the customer still gets an answer, limited per process
      expect(ping).toBe('PONG');
      expect(res.status).toBe(503);
      expect(res.body).toEqual({
        status: 'not_ready',
        checks: { postgres: 'ok', redis: 'ok' },
        rateLimiter: 'per-process-fallback',
        reasons: ['the rate limiter runs on its per-process fallback: Redis does not run the shared rate-limit script'],
      });
    } finally {
      await redis.admin.replicaof('NO', 'ONE');
    }
  });

  it('says ready again as soon as Redis takes the script again, without waiting for a customer request', async () => {
    await redis.admin.replicaof('NO', 'ONE');

    const res = await request(api.app).get('/readyz');

    expect(res.status).toBe(200);
    expect(res.body.rateLimiter).toBe('shared');
  });
});
