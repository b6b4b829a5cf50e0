import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import request from 'supertest';
import { createDb, type Db } from '@svc/core';
import { seedAccount } from '@svc/core/testing';
import { bearer, createTestApi, type TestApi } from './support.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const MISSING_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/svc_no_such_db_x';

let api: TestApi;

beforeAll(() => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' });
});
afterAll(async () => {
  await api.close();
});

describe('Unknown routes', () => {
  it('answers an unknown path under /api/v1 with a valid key with 404 not_found in the envelope', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);

    const res = await request(api.app).get('/api/v1/scans').set(bearer(key));

    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
  });

  it('answers an unsupported method on a known path with 404 not_found', async () => {
    const { key } = await seedAccount(api.db, ['read:sites', 'write:webhooks']);

    const res = await request(api.app).put('/api/v1/webhooks').set(bearer(key)).send({});

    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });

  it('authenticates before routing: an unknown /api/v1 path without a key is 401, revealing nothing', async () => {
    const res = await request(api.app).get('/api/v1/scans');

    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('unauthorized');
  });

  it.each(['/', '/nope', '/api/v2/sites', '/api/sites'])('answers %s outside /api/v1 with the 404 envelope and no key needed', async (path) => {
    const res = await request(api.app).get(path);

    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
  });

  it('answers a path with broken percent-encoding with a 4xx envelope, not a 5xx', async () => {
    const { key } = await seedAccount(api.db, ['read:sites', 'write:webhooks']);

    const site = await request(api.app).get('/api/v1/sites/%E0%A4%A').set(bearer(key));
    const webhook = await request(api.app).delete('/api/v1/webhooks/%zz').set(bearer(key));

    for (const res of [site, webhook]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    }
  });
});

describe('Ids that cannot exist', () => {
  it('answers an id holding a NUL byte with the same 404 not_found as any unknown id, not a 5xx', async () => {
    const { key } = await seedAccount(api.db, ['read:sites', 'write:webhooks']);

    const nulSite = await request(api.app).get('/api/v1/sites/site_%00x').set(bearer(key));
    const unknownSite = await request(api.app).get('/api/v1/sites/site_x').set(bearer(key));
    const nulWebhook = await request(api.app).delete('/api/v1/webhooks/wh_%00x').set(bearer(key));
    const unknownWebhook = await request(api.app).delete('/api/v1/webhooks/wh_x').set(bearer(key));

    expect(nulSite.status).toBe(404);
    expect(nulSite.body).toEqual(unknownSite.body);
    expect(nulWebhook.status).toBe(404);
    expect(nulWebhook.body).toEqual(unknownWebhook.body);
  });

  it('still checks the scope first for such an id', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);

    const site = await request(api.app).get('/api/v1/sites/site_%00x').set(bearer(key));
    const webhook = await request(api.app).delete('/api/v1/webhooks/wh_%00x').set(bearer(key));

    expect(site.status).toBe(403);
    expect(webhook.status).toBe(403);
  });

  it('answers a very long id with 404 not_found', async () => {
    const { key } = await seedAccount(api.db, ['read:sites', 'write:webhooks']);

    const site = await request(api.app).get(`/api/v1/sites/${'a'.repeat(8_000)}`).set(bearer(key));
    const webhook = await request(api.app).delete(`/api/v1/webhooks/${'a'.repeat(8_000)}`).set(bearer(key));

    expect(site.status).toBe(404);
    expect(site.body.error.code).toBe('not_found');
    expect(webhook.status).toBe(404);
    expect(webhook.body.error.code).toBe('not_found');
  });
});

describe('Request-Id', () => {
  it('puts a distinct UUID Request-Id on every response, success, handled error and health alike', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);

    const responses = [
      await request(api.app).get('/api/v1/sites').set(bearer(key)),
      await request(api.app).get('/api/v1/sites').set(bearer(key)),
      await request(api.app).get('/api/v1/sites'),
      await request(api.app).get('/api/v1/webhooks').set(bearer(key)),
      await request(api.app).get('/nope'),
      await request(api.app).get('/healthz'),
      await request(api.app).get('/readyz'),
    ];

    expect(responses.map((res) => res.status)).toEqual([200, 200, 401, 403, 404, 200, 200]);
    const ids = responses.map((res) => res.headers['request-id']);
    for (const id of ids) expect(id).toMatch(UUID);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('ignores a Request-Id sent by the client', async () => {
    const res = await request(api.app).get('/healthz').set('Request-Id', 'client-chosen');

    expect(res.headers['request-id']).toMatch(UUID);
  });
});

describe('Unexpected server errors', () => {
  let missingDb: Db;
  let broken: TestApi;
  let quietKnex: { mockRestore(): void };

  beforeAll(() => {
    // knex prints each failed connection attempt with its stack to console.log; the test reads the response instead.
    quietKnex = jest.spyOn(console, 'log').mockImplementation(() => undefined);
    missingDb = createDb(MISSING_DATABASE_URL, { poolMax: 2 });
    broken = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' }, { db: missingDb });
  });
  afterAll(async () => {
    await broken.close();
    await missingDb.destroy();
    quietKnex.mockRestore();
  });

  it('answers 500 with no envelope, no stack and no connection string when the database is missing', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);

    const res = await request(broken.app).get('/api/v1/sites').set(bearer(key));

    expect(res.status).toBe(500);
    expect(res.headers['content-type']).not.toMatch(/json/);
    expect(res.body).not.toHaveProperty('error');
    expect(res.text).not.toMatch(/"error"|"code"/);
    expect(res.text).not.toMatch(/^\s*at /m);
    expect(res.text).not.toContain('svc_no_such_db_x');
    expect(res.text).not.toContain('postgres');
    expect(res.text).not.toContain('does not exist');
    expect(res.headers['request-id']).toMatch(UUID);
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  it('still refuses a request without a key with 401 before the database is needed', async () => {
    const res = await request(broken.app).get('/api/v1/sites');

    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('unauthorized');
  });

  it('reports the missing database on /readyz with 503 while /healthz stays 200', async () => {
    const ready = await request(broken.app).get('/readyz');
    const live = await request(broken.app).get('/healthz');

    expect(ready.status).toBe(503);
    expect(ready.body).toEqual({ status: 'not_ready', checks: { postgres: 'down', redis: 'ok' }, rateLimiter: 'shared', reasons: ['PostgreSQL does not answer'] });
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'ok' });
  });
});

describe('Health', () => {
  it('answers /healthz with 200 {status: ok} without a key', async () => {
    const res = await request(api.app).get('/healthz');

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('answers /readyz with 200 when PostgreSQL and Redis both answer, without a key', async () => {
    const res = await request(api.app).get('/readyz');

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' }, rateLimiter: 'shared' });
  });

  it('ignores a bad Authorization header on health endpoints', async () => {
    const live = await request(api.app).get('/healthz').set('Authorization', 'Basic nonsense');
    const ready = await request(api.app).get('/readyz').set(bearer('svc_live_unknown'));

    expect(live.status).toBe(200);
    expect(ready.status).toBe(200);
  });
});
