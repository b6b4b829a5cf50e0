import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { Knex } from 'knex';
import { generateApiKey, hashApiKey, KEY_DISPLAY_LENGTH, newId, revokeApiKeyEverywhere } from '@svc/core';
import { seedAccount, waitFor } from '@svc/core/testing';
import { KeyCache, UnknownKeyCache } from '../src/app.js';
import { KeyLookupGate } from '../src/auth/key-lookup-gate.js';
import { bearer, createListeningTestApi, createTestApi, waitForIdlePool, whenRedisReady, type TestApi } from './support.js';

/** Counts every query the API's knex sends to Postgres (instrumentation: knex's own 'query' event). */
function countQueries(db: Knex): { readonly total: number; readonly onKeys: number; stop(): void } {
  const counts = { total: 0, onKeys: 0 };
  const listener = (query: { sql: string }) => {
    counts.total += 1;
    if (query.sql.includes('api_keys')) counts.onKeys += 1;
  };
  db.on('query', listener);
  return {
    get total() {
      return counts.total;
    },
    get onKeys() {
      return counts.onKeys;
    },
    stop: () => db.off('query', listener),
  };
}

function expectInvalidKey(res: request.Response): void {
  expect(res.status).toBe(401);
  expect(res.body).toEqual({ error: { code: 'invalid_key', message: expect.any(String) } });
  expect(res.headers['www-authenticate']).toBe('Bearer');
}

/** A key as our keys are, but inserted straight into the table (as the Settings service would). */
async function insertKey(db: Knex, accountId: string, key: string): Promise<string> {
  const id = newId('key');
  await db('api_keys').insert({
    id,
    account_id: accountId,
    name: 'inserted',
    key_hash: hashApiKey(key),
    prefix: key.slice(0, KEY_DISPLAY_LENGTH),
    scopes: 'read:sites',
  });
  return id;
}

describe('Tokens that cannot be a key', () => {
  let api: TestApi;

  beforeAll(() => {
    api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' });
  });
  afterAll(async () => {
    await api.close();
  });

  const wellFormed = generateApiKey();
  it.each([
    ['another prefix', `svc_test_${wellFormed.slice(9)}`],
    ['the prefix in capitals', `SVC_LIVE_${wellFormed.slice(9)}`],
    ['the prefix alone', 'svc_live_'],
    ['one character short', wellFormed.slice(0, -1)],
    ['one character too many', `${wellFormed}A`],
    ['a standard-base64 character', `${wellFormed.slice(0, -1)}+`],
    ['base64 padding', `${wellFormed.slice(0, -1)}=`],
    ['a dot', `${wellFormed.slice(0, -1)}.`],
    ['5,000 characters', `svc_live_${'a'.repeat(4_991)}`],
    ['a JWT', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl'],
    ['an SQL fragment', "svc_live_'OR'1'='1"],
  ])('refuses %s with 401 invalid_key without a single database query', async (_label, token) => {
    const queries = countQueries(api.db);

    const res = await request(api.app).get('/api/v1/sites').set(bearer(token));
    await waitForIdlePool(api.db);
    queries.stop();

    expectInvalidKey(res);
    expect(queries.total).toBe(0);
  });
});

describe('A well-formed key that is not a key (the negative cache)', () => {
  let api: TestApi;

  beforeAll(() => {
    api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' });
  });
  afterAll(async () => {
    await api.close();
  });

  it('asks Postgres once for an unknown key repeated within the TTL, and refuses it every time', async () => {
    const unknown = generateApiKey();
    const queries = countQueries(api.db);

    const responses = [];
    for (let i = 0; i < 5; i++) responses.push(await request(api.app).get('/api/v1/sites').set(bearer(unknown)));
    await waitForIdlePool(api.db);
    queries.stop();

    for (const res of responses) expectInvalidKey(res);
    expect(queries.onKeys).toBe(1);
    expect(queries.total).toBe(1);
  });

  it('refuses a revoked key at once and keeps refusing it', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    expect((await request(api.app).get('/api/v1/sites').set(bearer(key))).status).toBe(200);

    await revokeApiKeyEverywhere({ db: api.db, redis: api.redis, prefix: api.config.queuePrefix }, keyId);
    const first = await request(api.app).get('/api/v1/sites').set(bearer(key));
    const second = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expectInvalidKey(first);
    expectInvalidKey(second);
  });

  it('hides a key created after its miss for at most the TTL when no creation notice can arrive', async () => {
    const unknownKeyCache = new UnknownKeyCache(300);
    const short = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' }, { db: api.db, redis: api.redis }, { unknownKeyCache });
    try {
      const { accountId } = await seedAccount(api.db, ['read:sites']);
      const key = generateApiKey();
      expectInvalidKey(await request(short.app).get('/api/v1/sites').set(bearer(key)));
      const createdAt = Date.now();
      await insertKey(api.db, accountId, key);

      const accepted = await waitFor(async () => {
        const res = await request(short.app).get('/api/v1/sites').set(bearer(key));
        return res.status === 200 ? Date.now() : undefined;
      }, 5_000, 'the new key to be accepted');

      expect(accepted - createdAt).toBeLessThan(5_000);
    } finally {
      await short.close();
    }
  });

  it('forgets the oldest unknown keys first past its size bound', () => {
    const cache = new UnknownKeyCache(60_000, 3);
    for (const hash of ['a', 'b', 'c', 'd']) cache.add(hash, cache.currentGeneration());

    expect(cache.size).toBe(3);
    expect(cache.has('a')).toBe(false);
    expect(cache.has('d')).toBe(true);
  });
});

describe('A key created after its hash was refused, while the API listens for key creations', () => {
  let api: TestApi;

  beforeAll(async () => {
    // A TTL far past the test: only the creation notice can make the key usable in time.
    api = await createListeningTestApi({ RATE_LIMIT_PER_MINUTE: '1000' }, undefined, { unknownKeyCache: new UnknownKeyCache(10 * 60_000) });
  });
  afterAll(async () => {
    await api.close();
  });

  it('is accepted as soon as Postgres announces it, long before the negative cache would expire', async () => {
    const { accountId } = await seedAccount(api.db, ['read:sites']);
    const key = generateApiKey();
    expectInvalidKey(await request(api.app).get('/api/v1/sites').set(bearer(key)));
    expectInvalidKey(await request(api.app).get('/api/v1/sites').set(bearer(key)));

    await insertKey(api.db, accountId, key);
    const status = await waitFor(async () => {
      const res = await request(api.app).get('/api/v1/sites').set(bearer(key));
      return res.status === 200 ? res.status : undefined;
    }, 10_000, 'the new key to be accepted').catch(() => 401);

    expect(status).toBe(200);
  });
});

describe('lastUsedAt of a key refused as revoked', () => {
  it('does not move when a process that had the key cached refuses it', async () => {
    // Two processes' worth of trackers over one key cache: the second has never written this
    // key's use, as after a cache refresh a minute later.
    const keyCache = new KeyCache();
    const first = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' }, undefined, { keyCache });
    const second = createTestApi(
      { RATE_LIMIT_PER_MINUTE: '1000', QUEUE_PREFIX: first.config.queuePrefix },
      { db: first.db, redis: first.redis },
      { keyCache },
    );
    try {
      await whenRedisReady(first.redis);
      const { key, keyId } = await seedAccount(first.db, ['read:sites']);
      const twoMinutesAgo = new Date(Date.now() - 120_000);
      await first.db('api_keys').where({ id: keyId }).update({ last_used_at: twoMinutesAgo });
      expect((await request(first.app).get('/api/v1/sites').set(bearer(key))).status).toBe(200);
      await waitForIdlePool(first.db);
      await revokeApiKeyEverywhere({ db: first.db, redis: first.redis, prefix: first.config.queuePrefix }, keyId);
      await first.db('api_keys').where({ id: keyId }).update({ last_used_at: twoMinutesAgo });

      const res = await request(second.app).get('/api/v1/sites').set(bearer(key));
      await waitForIdlePool(first.db);
      const row = await first.db('api_keys').where({ id: keyId }).first('last_used_at');

      expectInvalidKey(res);
      expect((row.last_used_at as Date).getTime()).toBe(twoMinutesAgo.getTime());
    } finally {
      await second.close();
      await first.close();
    }
  });
});

describe('The key lookup gate', () => {
  it('lets at most its bound of lookups run at once and runs every one of them, in order', async () => {
    const gate = new KeyLookupGate(2);
    let running = 0;
    let most = 0;
    const finished: number[] = [];

    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        gate.run(async () => {
          running += 1;
          most = Math.max(most, running);
          await new Promise((resolve) => setImmediate(resolve));
          running -= 1;
          finished.push(i);
        }),
      ),
    );

    expect(most).toBe(2);
    expect(finished).toHaveLength(10);
  });

  it('frees its slot when a lookup fails', async () => {
    const gate = new KeyLookupGate(1);

    await expect(gate.run(async () => Promise.reject(new Error('database away')))).rejects.toThrow('database away');
    const after = await gate.run(async () => 'ran');

    expect(after).toBe('ran');
  });
});
