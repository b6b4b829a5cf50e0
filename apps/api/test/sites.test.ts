import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { completeScan } from '@svc/core';
import { createSite, markScanFailed, startScan } from '@svc/core/operator';
import { seedAccount, seedSite } from '@svc/core/testing';
import { bearer, createTestApi, type TestApi } from './support.js';

let api: TestApi;
const noQueue = { fanout: { add: async () => undefined } } as never;

beforeAll(() => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' });
});
afterAll(async () => {
  await api.close();
});

describe('GET /api/v1/sites', () => {
  it('lists the account’s sites newest first as summaries without latestScan', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites']);
    const first = await createSite(api.db, accountId, { domain: 'https://www.First.example/', name: 'First' });
    const second = await seedSite(api.db, accountId, { status: 'prospect' });

    const res = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: {
        sites: [
          { id: second.id, domain: second.domain, name: null, status: 'prospect', createdAt: second.createdAt.toISOString() },
          { id: first.id, domain: 'first.example', name: 'First', status: 'active', createdAt: first.createdAt.toISOString() },
        ],
      },
    });
    expect(res.body.data.sites[0]).not.toHaveProperty('latestScan');
  });

  it('never shows another account’s sites', async () => {
    const mine = await seedAccount(api.db, ['read:sites']);
    const theirs = await seedAccount(api.db, ['read:sites']);
    await seedSite(api.db, theirs.accountId);

    const res = await request(api.app).get('/api/v1/sites').set(bearer(mine.key));

    expect(res.status).toBe(200);
    expect(res.body.data.sites).toEqual([]);
  });

  it('returns at most 100 sites, the 100 most recently added', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites']);
    const rows = Array.from({ length: 105 }, (_, i) => ({
      id: `site_bulk${i.toString().padStart(3, '0')}${accountId.slice(-8)}`,
      account_id: accountId,
      domain: `bulk-${i}.example.com`,
      created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)),
    }));
    await api.db('sites').insert(rows);

    const res = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.body.data.sites).toHaveLength(100);
    expect(res.body.data.sites[0].domain).toBe('bulk-104.example.com');
    expect(res.body.data.sites[99].domain).toBe('bulk-5.example.com');
  });

  it('refuses a key without read:sites with 403 insufficient_scope naming the scope', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks', 'write:webhooks']);

    const res = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_scope');
    expect(res.body.error.message).toContain('read:sites');
  });
});

describe('GET /api/v1/sites/{siteId}', () => {
  it('shows latestScan null for a site with no scan at all', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites']);
    const site = await seedSite(api.db, accountId, { name: 'Shop' });

    const res = await request(api.app).get(`/api/v1/sites/${site.id}`).set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: {
        site: {
          id: site.id,
          domain: site.domain,
          name: 'Shop',
          status: 'active',
          createdAt: site.createdAt.toISOString(),
          latestScan: null,
        },
      },
    });
  });

  it('keeps latestScan null while the first scan is still running, and after it fails', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites']);
    const site = await seedSite(api.db, accountId);
    const running = await startScan(api.db, site.id);

    const whileRunning = await request(api.app).get(`/api/v1/sites/${site.id}`).set(bearer(key));
    await markScanFailed(api.db, running.id);
    const afterFailure = await request(api.app).get(`/api/v1/sites/${site.id}`).set(bearer(key));

    expect(whileRunning.body.data.site.latestScan).toBeNull();
    expect(afterFailure.body.data.site.latestScan).toBeNull();
  });

  it('shows the most recently completed scan, ignoring later running and failed scans', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites']);
    const site = await seedSite(api.db, accountId);
    const older = await startScan(api.db, site.id);
    await completeScan({ db: api.db, queues: noQueue }, { scanId: older.id, score: 41.5 });
    const newer = await startScan(api.db, site.id);
    const { scan } = await completeScan({ db: api.db, queues: noQueue }, { scanId: newer.id, score: 87 });
    await startScan(api.db, site.id);
    await markScanFailed(api.db, (await startScan(api.db, site.id)).id);

    const res = await request(api.app).get(`/api/v1/sites/${site.id}`).set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.body.data.site.latestScan).toEqual({
      id: newer.id,
      score: 87,
      status: 'completed',
      completedAt: scan.completedAt?.toISOString(),
    });
  });

  it('answers 404 not_found for another account’s site, exactly as for an unknown id', async () => {
    const mine = await seedAccount(api.db, ['read:sites']);
    const theirs = await seedAccount(api.db, ['read:sites']);
    const site = await seedSite(api.db, theirs.accountId);

    const foreign = await request(api.app).get(`/api/v1/sites/${site.id}`).set(bearer(mine.key));
    const unknown = await request(api.app).get('/api/v1/sites/site_doesnotexist').set(bearer(mine.key));

    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toEqual(foreign.body.error);
  });

  it('refuses a key without read:sites with 403 insufficient_scope', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:webhooks']);
    const site = await seedSite(api.db, accountId);

    const res = await request(api.app).get(`/api/v1/sites/${site.id}`).set(bearer(key));

    expect(res.status).toBe(403);
    expect(res.body.error).toEqual({ code: 'insufficient_scope', message: expect.stringContaining('read:sites') });
  });
});
