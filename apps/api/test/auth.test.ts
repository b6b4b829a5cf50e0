import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { revokeApiKeyEverywhere, type Scope } from '@svc/core';
import { createApiKey, createSubscription, revokeApiKey } from '@svc/core/operator';
import { ALL_SCOPES, seedAccount, seedSite, waitFor } from '@svc/core/testing';
import {
  bearer,
  createListeningTestApi,
  createTestApi,
  createUnreachableRedis,
  waitForIdlePool,
  whenRedisReady,
  type TestApi,
} from './support.js';

let api: TestApi;

beforeAll(() => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' });
});
afterAll(async () => {
  await api.close();
});

function expectUnauthorized(res: request.Response, code: 'unauthorized' | 'invalid_key'): void {
  expect(res.status).toBe(401);
  expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
  expect(res.headers['www-authenticate']).toBe('Bearer');
}

async function lastUsedAt(keyId: string): Promise<Date | null> {
  const row = await api.db('api_keys').where({ id: keyId }).first('last_used_at');
  return row.last_used_at as Date | null;
}

describe('Authorization header', () => {
  it('refuses a request without the header with 401 unauthorized and WWW-Authenticate: Bearer', async () => {
    const res = await request(api.app).get('/api/v1/sites');

    expectUnauthorized(res, 'unauthorized');
    expect(res.headers['x-ratelimit-limit']).toBeUndefined();
  });

  it('refuses an empty header with 401 unauthorized', async () => {
    const res = await request(api.app).get('/api/v1/sites').set('Authorization', '');

    expectUnauthorized(res, 'unauthorized');
  });

  it.each([
    ['a Basic credential', 'Basic x'],
    ['Basic with a real-looking key', 'Basic svc_live_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'],
    ['Bearer with no token', 'Bearer'],
    ['Bearer followed by spaces only', 'Bearer    '],
    ['two tokens', 'Bearer a b'],
    ['a token with a space inside', 'Bearer svc_live_abc def'],
    ['a token alone, without the scheme', 'svc_live_abcdefghijklmnop'],
    ['a token with a non-ASCII character', 'Bearer svc_live_é'],
  ])('refuses %s with 401 unauthorized, not invalid_key', async (_label, header) => {
    const res = await request(api.app).get('/api/v1/sites').set('Authorization', header);

    expectUnauthorized(res, 'unauthorized');
  });

  it('refuses a well-formed but unknown key with 401 invalid_key', async () => {
    const res = await request(api.app).get('/api/v1/sites').set(bearer('svc_live_thiskeywasneverissuedtoanyone000'));

    expectUnauthorized(res, 'invalid_key');
  });

  it('refuses an absurdly long token with 401 invalid_key', async () => {
    const res = await request(api.app).get('/api/v1/sites').set(bearer(`svc_live_${'a'.repeat(5_000)}`));

    expectUnauthorized(res, 'invalid_key');
  });

  it('refuses a key differing from a real one by its last character with invalid_key', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);
    const altered = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');

    const res = await request(api.app).get('/api/v1/sites').set(bearer(altered));

    expectUnauthorized(res, 'invalid_key');
  });

  it('accepts a valid key with 200 and no WWW-Authenticate', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);

    const res = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.headers['www-authenticate']).toBeUndefined();
  });
});

describe('Revoked keys', () => {
  it('refuses a revoked key with 401 invalid_key at once, in this process and in another one that had it cached', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    const other = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000', QUEUE_PREFIX: api.config.queuePrefix }, { db: api.db });
    try {
      await whenRedisReady(other.redis);
      expect((await request(api.app).get('/api/v1/sites').set(bearer(key))).status).toBe(200);
      expect((await request(other.app).get('/api/v1/sites').set(bearer(key))).status).toBe(200);

      await revokeApiKeyEverywhere({ db: api.db, redis: api.redis, prefix: api.config.queuePrefix }, keyId);
      const here = await request(api.app).get('/api/v1/sites').set(bearer(key));
      const there = await request(other.app).get('/api/v1/sites').set(bearer(key));

      expectUnauthorized(here, 'invalid_key');
      expectUnauthorized(there, 'invalid_key');
      const row = await api.db('api_keys').where({ id: keyId }).first('revoked_at');
      expect(row.revoked_at).toBeInstanceOf(Date);
    } finally {
      await other.close();
    }
  });

  it('refuses a key revoked only in Postgres at once in a process that had not cached it', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    const fresh = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000', QUEUE_PREFIX: api.config.queuePrefix }, { db: api.db });
    try {
      await revokeApiKey(api.db, keyId);

      expectUnauthorized(await request(fresh.app).get('/api/v1/sites').set(bearer(key)), 'invalid_key');
    } finally {
      await fresh.close();
    }
  });

  it('drops a cached key as soon as Postgres announces its revocation, however it was revoked', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    const listening = await createListeningTestApi({ RATE_LIMIT_PER_MINUTE: '1000' }, { db: api.db });
    try {
      expect((await request(listening.app).get('/api/v1/sites').set(bearer(key))).status).toBe(200);
      expect((await request(listening.app).get('/api/v1/sites').set(bearer(key))).status).toBe(200);

      await api.db('api_keys').where({ id: keyId }).update({ revoked_at: api.db.fn.now() });

      // The notification travels after the commit; this waits for it, bounded, never a fixed sleep.
      const refused = await waitFor(
        async () => {
          const res = await request(listening.app).get('/api/v1/sites').set(bearer(key));
          return res.status === 401 && res;
        },
        2_000,
        'the revocation notification to reach the process',
      );
      expectUnauthorized(refused, 'invalid_key');
    } finally {
      await listening.close();
    }
  });

  it('checks a cached key against Postgres again while Redis is away, so a revocation is not missed', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    const redis = createUnreachableRedis();
    const offline = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' }, { db: api.db, redis });
    try {
      expect((await request(offline.app).get('/api/v1/sites').set(bearer(key))).status).toBe(200);

      await revokeApiKey(api.db, keyId);

      expectUnauthorized(await request(offline.app).get('/api/v1/sites').set(bearer(key)), 'invalid_key');
    } finally {
      await offline.close();
      redis.disconnect();
    }
  });

  it('keeps the account’s other keys working after one is revoked', async () => {
    const { accountId, keyId } = await seedAccount(api.db, ['read:sites']);
    const second = await createApiKey(api.db, accountId, { name: 'second', scopes: ['read:sites'] });

    await revokeApiKey(api.db, keyId);
    const res = await request(api.app).get('/api/v1/sites').set(bearer(second.key));

    expect(res.status).toBe(200);
  });
});

describe('Scopes', () => {
  const endpoints: Array<{ method: 'get' | 'post' | 'delete'; path: string; scope: Scope }> = [
    { method: 'get', path: '/api/v1/sites', scope: 'read:sites' },
    { method: 'get', path: '/api/v1/sites/:site', scope: 'read:sites' },
    { method: 'get', path: '/api/v1/webhooks', scope: 'read:webhooks' },
    { method: 'post', path: '/api/v1/webhooks', scope: 'write:webhooks' },
    { method: 'delete', path: '/api/v1/webhooks/:subscription', scope: 'write:webhooks' },
  ];

  it.each(endpoints)(
    'refuses $method $path to a key holding every scope but $scope with 403 insufficient_scope naming it, and changes nothing',
    async ({ method, path, scope }) => {
      const { accountId, key } = await seedAccount(
        api.db,
        ALL_SCOPES.filter((granted) => granted !== scope),
      );
      const site = await seedSite(api.db, accountId);
      const subscription = await createSubscription(api.db, accountId, { url: 'https://hooks.example/in', events: ['*'] });
      const url = path.replace(':site', site.id).replace(':subscription', subscription.id);

      let call = request(api.app)[method](url).set(bearer(key));
      if (method === 'post') call = call.send({ url: 'https://other.example/in', events: ['scan.completed'] });
      const res = await call;

      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: { code: 'insufficient_scope', message: expect.stringContaining(scope) } });
      const stored = await api.db('webhook_subscriptions').where({ account_id: accountId }).select('id', 'status');
      expect(stored).toEqual([{ id: subscription.id, status: 'active' }]);
    },
  );

  it.each(endpoints)('lets a key holding only $scope through $method $path', async ({ method, path, scope }) => {
    const { accountId, key } = await seedAccount(api.db, [scope]);
    const site = await seedSite(api.db, accountId);
    const subscription = await createSubscription(api.db, accountId, { url: 'https://hooks.example/in', events: ['*'] });
    const url = path.replace(':site', site.id).replace(':subscription', subscription.id);

    let call = request(api.app)[method](url).set(bearer(key));
    if (method === 'post') call = call.send({ url: 'https://other.example/in', events: ['scan.completed'] });
    const res = await call;

    expect(res.status).toBe(method === 'post' ? 201 : 200);
  });

  it('does not let write:webhooks stand in for read:webhooks', async () => {
    const { key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await request(api.app).get('/api/v1/webhooks').set(bearer(key));

    expect(res.status).toBe(403);
    expect(res.body.error.message).toContain('read:webhooks');
  });
});

describe('Last-used time', () => {
  it('records last_used_at after a request with a fresh key', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    expect(await lastUsedAt(keyId)).toBeNull();

    const res = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expect(res.status).toBe(200);
    const recorded = await waitFor(() => lastUsedAt(keyId).then((at) => at ?? undefined), 5_000, 'last_used_at');
    expect(recorded).toBeInstanceOf(Date);
  });

  it('does not rewrite last_used_at for a second request within the minute, even through another process', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    await request(api.app).get('/api/v1/sites').set(bearer(key));
    const first = await waitFor(() => lastUsedAt(keyId).then((at) => at ?? undefined), 5_000, 'last_used_at');
    const other = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' }, { db: api.db });
    try {
      await request(api.app).get('/api/v1/sites').set(bearer(key));
      await request(other.app).get('/api/v1/sites').set(bearer(key));
      await waitForIdlePool(api.db);

      expect((await lastUsedAt(keyId))?.getTime()).toBe(first.getTime());
    } finally {
      await other.close();
    }
  });

  it('refreshes last_used_at when the stored time is over a minute old', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    await api.db('api_keys').where({ id: keyId }).update({ last_used_at: api.db.raw(`now() - interval '5 minutes'`) });
    const stale = (await lastUsedAt(keyId)) as Date;

    await request(api.app).get('/api/v1/sites').set(bearer(key));

    await waitFor(async () => ((await lastUsedAt(keyId)) as Date).getTime() > stale.getTime(), 5_000, 'a newer last_used_at');
  });

  it('records the use of a key even when the request is then refused for its scope', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:webhooks']);

    const res = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expect(res.status).toBe(403);
    await waitFor(() => lastUsedAt(keyId).then((at) => at ?? undefined), 5_000, 'last_used_at');
  });

  it('never touches last_used_at for a revoked key', async () => {
    const { key, keyId } = await seedAccount(api.db, ['read:sites']);
    await revokeApiKey(api.db, keyId);

    const res = await request(api.app).get('/api/v1/sites').set(bearer(key));
    await waitForIdlePool(api.db);

    expect(res.status).toBe(401);
    expect(await lastUsedAt(keyId)).toBeNull();
  });
});

describe('Stored keys', () => {
  it('stores only the SHA-256 hex of the key, its first 12 characters and comma-separated scopes', async () => {
    const { accountId } = await seedAccount(api.db, ['read:sites']);

    const created = await createApiKey(api.db, accountId, { name: 'nightly export', scopes: ['read:sites', 'read:webhooks', 'write:webhooks'] });
    const row = await api.db('api_keys').where({ id: created.id }).first();

    expect(created.key).toMatch(/^svc_live_[A-Za-z0-9_-]+$/);
    expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row.key_hash).toBe(createHash('sha256').update(created.key).digest('hex'));
    expect(row.prefix).toBe(created.key.slice(0, 12));
    expect(row.scopes).toBe('read:sites,read:webhooks,write:webhooks');
    expect(row.account_id).toBe(accountId);
    for (const value of Object.values(row)) {
      if (typeof value === 'string') expect(value.includes(created.key.slice(12))).toBe(false);
    }
  });
});
