import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { completeAiMonitorRun } from '@svc/core';
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

const latest = (key: string, siteId: string) => request(api.app).get(`/api/v1/sites/${siteId}/ai-monitor/latest`).set(bearer(key));

describe('GET /api/v1/sites/{siteId}/ai-monitor/latest', () => {
  it('answers run: null while no run has completed', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:ai-monitor']);
    const site = await seedSite(api.db, accountId);

    const res = await latest(key, site.id);

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { run: null } });
    expect(await api.db('ai_monitor_runs').where({ site_id: site.id })).toEqual([]);
  });

  it('shows the latest run with its composite score and per-engine breakdown', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:ai-monitor']);
    const site = await seedSite(api.db, accountId);
    await completeAiMonitorRun({ db: api.db, queues: noQueue }, { siteId: site.id, compositeScore: 40 });
    const engines = [
      { engine: 'chatgpt', score: 71 },
      { engine: 'gemini', score: 66.5 },
    ];
    const { run } = await completeAiMonitorRun({ db: api.db, queues: noQueue }, { siteId: site.id, compositeScore: 68.75, engines });

    const res = await latest(key, site.id);

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: {
        run: { id: run.id, siteId: site.id, status: 'completed', compositeScore: 68.75, completedAt: run.completedAt.toISOString(), engines },
      },
    });
    expect((await api.db('ai_monitor_runs').where({ id: run.id }).first()).engines).toEqual(engines);
  });

  it('breaks a tie of completion times by id, as the history does', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:ai-monitor']);
    const site = await seedSite(api.db, accountId);
    const at = new Date('2026-04-01T00:00:00.000Z');
    await api.db('ai_monitor_runs').insert([
      { id: `run_b_${site.id}`, site_id: site.id, composite_score: 2, completed_at: at },
      { id: `run_a_${site.id}`, site_id: site.id, composite_score: 1, completed_at: at },
    ]);

    const res = await latest(key, site.id);

    expect(res.body.data.run).toMatchObject({ id: `run_b_${site.id}`, compositeScore: 2, engines: [] });
  });

  it('refuses a key without read:ai-monitor with 403 naming the scope', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites', 'read:scans']);
    const site = await seedSite(api.db, accountId);

    const res = await latest(key, site.id);

    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_scope');
    expect(res.body.error.message).toContain('read:ai-monitor');
  });

  it('answers not_found for another account’s site, even one with runs, and for unknown ids', async () => {
    const mine = await seedAccount(api.db, ['read:ai-monitor']);
    const theirs = await seedAccount(api.db, ['read:ai-monitor']);
    const theirSite = await seedSite(api.db, theirs.accountId);
    await completeAiMonitorRun({ db: api.db, queues: noQueue }, { siteId: theirSite.id, compositeScore: 50 });

    for (const siteId of [theirSite.id, 'site_missing', '%E2%98%83']) {
      const res = await latest(mine.key, siteId);
      expect({ siteId, status: res.status, body: res.body }).toEqual({
        siteId,
        status: 404,
        body: { error: { code: 'not_found', message: 'No site with this id exists in your account.' } },
      });
    }
  });
});
