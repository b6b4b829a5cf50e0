import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createLogger, createRedis, rateLimitWindowKey, type Redis } from '@svc/core';
import { createApiKey } from '@svc/core/operator';
import { seedAccount, TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';
import { SlidingWindowLimiter } from '../src/rate-limit/sliding-window-limiter.js';
import { bearer, createTestApi, createUnreachableRedis, whenRedisReady, type TestApi } from './support.js';

const LIMIT = 5;
let api: TestApi;

beforeAll(async () => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: String(LIMIT) });
  await whenRedisReady(api.redis);
});
afterAll(async () => {
  await api.close();
});

const get = (target: TestApi, key: string) => request(target.app).get('/api/v1/webhooks').set(bearer(key));

async function storedRequestCount(prefix: string, keyId: string): Promise<number> {
  return api.redis.zcard(rateLimitWindowKey(prefix, keyId));
}

function expectRateLimited(res: request.Response): void {
  expect(res.status).toBe(429);
  expect(res.body).toEqual({ error: { code: 'rate_limited', message: expect.any(String) } });
  expect(res.headers['retry-after']).toBe('60');
}

describe('Per-key rate limit', () => {
  it('lets the first LIMIT requests through and refuses the next with 429 rate_limited and Retry-After: 60', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:webhooks']);

    const allowed = [];
    for (let i = 0; i < LIMIT; i++) allowed.push(await get(api, key));
    const refused = await get(api, key);

    expect(allowed.map((res) => res.status)).toEqual(Array(LIMIT).fill(200));
    expectRateLimited(refused);
    expect(await storedRequestCount(api.config.queuePrefix, keyId)).toBe(LIMIT);
  });

  it('reports the limit, what remains and the reset time in epoch seconds on every limited response', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);
    const before = Date.now();

    const responses = [];
    for (let i = 0; i < LIMIT + 1; i++) responses.push(await get(api, key));
    const after = Date.now();

    expect(responses.map((res) => res.headers['x-ratelimit-limit'])).toEqual(Array(LIMIT + 1).fill(String(LIMIT)));
    expect(responses.map((res) => Number(res.headers['x-ratelimit-remaining']))).toEqual([4, 3, 2, 1, 0, 0]);
    for (const res of responses) {
      const reset = Number(res.headers['x-ratelimit-reset']);
      expect(Number.isInteger(reset)).toBe(true);
      // The oldest counted request leaves the 60 s window at this time (seconds, not milliseconds).
      expect(reset).toBeGreaterThanOrEqual(Math.floor(before / 1000) + 60);
      expect(reset).toBeLessThanOrEqual(Math.ceil(after / 1000) + 60);
    }
    // Every response counts from the same oldest request, so all announce the same reset.
    expect(new Set(responses.map((res) => res.headers['x-ratelimit-reset'])).size).toBe(1);
  });

  it('limits each key on its own: another key of the same account still gets through', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:webhooks']);
    const second = await createApiKey(api.db, accountId, { name: 'second', scopes: ['read:webhooks'] });
    for (let i = 0; i < LIMIT; i++) await get(api, key);

    const exhausted = await get(api, key);
    const fresh = await get(api, second.key);

    expectRateLimited(exhausted);
    expect(fresh.status).toBe(200);
    expect(fresh.headers['x-ratelimit-remaining']).toBe(String(LIMIT - 1));
  });

  it('counts requests refused for scope, since they reached the API with a valid key', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);

    const responses = [];
    for (let i = 0; i < LIMIT + 1; i++) responses.push(await get(api, key));

    expect(responses.slice(0, LIMIT).map((res) => res.status)).toEqual(Array(LIMIT).fill(403));
    expectRateLimited(responses[LIMIT] as request.Response);
    expect(await storedRequestCount(api.config.queuePrefix, keyId)).toBe(LIMIT);
  });

  it('does not count refused requests: the window holds exactly LIMIT entries after many 429s', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:webhooks']);
    for (let i = 0; i < LIMIT; i++) await get(api, key);

    const refused = [];
    for (let i = 0; i < 4; i++) refused.push(await get(api, key));

    refused.forEach(expectRateLimited);
    expect(await storedRequestCount(api.config.queuePrefix, keyId)).toBe(LIMIT);
  });

  it('does not count requests without a valid key against anybody', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:webhooks']);

    for (let i = 0; i < LIMIT + 2; i++) {
      expect((await get(api, `${key}x`)).status).toBe(401);
    }
    const res = await get(api, key);

    expect(res.status).toBe(200);
    expect(await storedRequestCount(api.config.queuePrefix, keyId)).toBe(1);
  });

  it('shares one count between API processes on one Redis: 3 via A and 2 via B, then both refuse', async () => {
    const prefix = `test-shared-${uniqueTag()}`;
    const a = createTestApi({ RATE_LIMIT_PER_MINUTE: String(LIMIT), QUEUE_PREFIX: prefix }, { db: api.db });
    const b = createTestApi({ RATE_LIMIT_PER_MINUTE: String(LIMIT), QUEUE_PREFIX: prefix }, { db: api.db });
    try {
      await Promise.all([whenRedisReady(a.redis), whenRedisReady(b.redis)]);
      const { key, keyId } = await seedAccount(api.db, ['read:webhooks']);

      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await get(a, key)).status);
      for (let i = 0; i < 2; i++) statuses.push((await get(b, key)).status);
      const nextViaA = await get(a, key);
      const nextViaB = await get(b, key);

      expect(statuses).toEqual([200, 200, 200, 200, 200]);
      expectRateLimited(nextViaA);
      expectRateLimited(nextViaB);
      expect(await storedRequestCount(prefix, keyId)).toBe(LIMIT);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('Health endpoints and the rate limit', () => {
  it('never limits /healthz or /readyz and never charges them to the key presented', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:webhooks']);

    const health = [];
    for (let i = 0; i < LIMIT * 2; i++) {
      health.push(await request(api.app).get(i % 2 ? '/healthz' : '/readyz').set(bearer(key)));
    }
    const first = await get(api, key);

    expect(health.map((res) => res.status)).toEqual(Array(LIMIT * 2).fill(200));
    for (const res of health) expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    expect(first.status).toBe(200);
    expect(first.headers['x-ratelimit-remaining']).toBe(String(LIMIT - 1));
    expect(await storedRequestCount(api.config.queuePrefix, keyId)).toBe(1);
  });

  it('keeps answering /healthz and /readyz after a key is exhausted', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);
    for (let i = 0; i <= LIMIT; i++) await get(api, key);

    const healthz = await request(api.app).get('/healthz').set(bearer(key));
    const readyz = await request(api.app).get('/readyz').set(bearer(key));

    expect(healthz.status).toBe(200);
    expect(readyz.status).toBe(200);
    expect(readyz.body.rateLimiter).toBe('shared');
  });
});

describe('When Redis is unreachable', () => {
  let down: Redis;
  let degraded: TestApi;
  let degradedToo: TestApi;

  beforeAll(() => {
    down = createUnreachableRedis();
    degraded = createTestApi({ RATE_LIMIT_PER_MINUTE: String(LIMIT) }, { db: api.db, redis: down });
    degradedToo = createTestApi({ RATE_LIMIT_PER_MINUTE: String(LIMIT) }, { db: api.db, redis: down });
  });
  afterAll(async () => {
    await degraded.close();
    await degradedToo.close();
    down.disconnect();
  });

  it('still serves requests with 200, not 5xx, and still sends the rate-limit headers', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);

    const res = await get(degraded, key);

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { subscriptions: [] } });
    expect(res.headers['x-ratelimit-limit']).toBe(String(LIMIT));
    expect(res.headers['x-ratelimit-remaining']).toBe(String(LIMIT - 1));
  });

  it('still applies the limit within each process', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);

    const statuses = [];
    for (let i = 0; i < LIMIT; i++) statuses.push((await get(degraded, key)).status);
    const refused = await get(degraded, key);
    // Without the shared window, another process keeps its own count (documented degradation).
    const elsewhere = await get(degradedToo, key);

    expect(statuses).toEqual(Array(LIMIT).fill(200));
    expectRateLimited(refused);
    expect(elsewhere.status).toBe(200);
  });

  it('answers /readyz with 503, Redis down and the limiter on its per-process fallback', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);
    await get(degraded, key);

    const res = await request(degraded.app).get('/readyz');

    expect(res.status).toBe(503);
    expect(res.body).toEqual({
      status: 'not_ready',
      checks: { postgres: 'ok', redis: 'down' },
      rateLimiter: 'per-process-fallback',
      reasons: [
        'Redis does not answer',
        'the rate limiter runs on its per-process fallback: Redis does not run the shared rate-limit script',
      ],
    });
  });

  it('still answers /healthz with 200', async () => {
    const res = await request(degraded.app).get('/healthz');

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });
});

describe('SlidingWindowLimiter on Redis', () => {
  let redis: Redis;
  const logger = createLogger('error', { silent: true });

  beforeAll(async () => {
    redis = createRedis(TEST_REDIS_URL, 'fast-fail');
    redis.on('error', () => undefined);
    await whenRedisReady(redis);
  });
  afterAll(() => {
    redis.disconnect();
  });

  async function redisNowMs(): Promise<number> {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  it('refuses a request until the oldest one leaves the window, then lets exactly one more in (no 2× burst)', async () => {
    const windowMs = 1_000;
    const limit = 3;
    const keyPrefix = `test-window-${uniqueTag()}`;
    const limiter = new SlidingWindowLimiter({ redis, limit, keyPrefix, logger, windowMs });
    const subject = 'key_window';
    const setKey = rateLimitWindowKey(keyPrefix, subject);

    expect((await limiter.consume(subject)).allowed).toBe(true);
    const [, oldestScore] = await redis.zrange(setKey, 0, 0, 'WITHSCORES');
    const oldest = Number(oldestScore);
    // The other two arrive half a window later, so a fixed window would let a fresh burst in at its boundary.
    await waitFor(async () => (await redisNowMs()) >= oldest + windowMs / 2, 5_000, 'half a window');
    expect((await limiter.consume(subject)).allowed).toBe(true);
    expect((await limiter.consume(subject)).allowed).toBe(true);

    // Every decision is kept with Redis's clock around it; the poll only waits, the asserts come after.
    const refused: Array<{ before: number; remaining: number; resetAtMs: number }> = [];
    const freed = await waitFor(
      async () => {
        const before = await redisNowMs();
        const decision = await limiter.consume(subject);
        const after = await redisNowMs();
        if (decision.allowed) return { after };
        refused.push({ before, remaining: decision.remaining, resetAtMs: decision.resetAtMs });
        return undefined;
      },
      5_000,
      'the oldest request to leave the window',
    );

    expect(refused.length).toBeGreaterThan(0);
    for (const refusal of refused) {
      expect(refusal.before).toBeLessThan(oldest + windowMs);
      expect(refusal).toMatchObject({ remaining: 0, resetAtMs: oldest + windowMs });
    }
    expect(freed.after).toBeGreaterThanOrEqual(oldest + windowMs);
    // The two later requests are still in the window: only one slot was freed.
    const next = await limiter.consume(subject);
    expect(next.allowed).toBe(false);
    expect(await redis.zcard(setKey)).toBe(limit);
    expect(await redis.pttl(setKey)).toBeGreaterThan(0);
  });

  it('lets no more than the limit through when many requests race on one key', async () => {
    const keyPrefix = `test-race-${uniqueTag()}`;
    const limiter = new SlidingWindowLimiter({ redis, limit: 10, keyPrefix, logger });
    const other = new SlidingWindowLimiter({ redis, limit: 10, keyPrefix, logger });

    const decisions = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? limiter : other).consume('key_race')),
    );

    expect(decisions.filter((decision) => decision.allowed)).toHaveLength(10);
    expect(await redis.zcard(rateLimitWindowKey(keyPrefix, 'key_race'))).toBe(10);
  });
});
