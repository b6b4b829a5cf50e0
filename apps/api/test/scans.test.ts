import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { completeScan, type Db } from '@svc/core';
import { markScanFailed, startScan } from '@svc/core/operator';
import { seedAccount, seedSite } from '@svc/core/testing';
import { bearer, createTestApi, type TestApi } from './support.js';

let api: TestApi;
const noQueue = { fanout: { add: async () => undefined } } as never;

beforeAll(() => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: '100000' });
});
afterAll(async () => {
  await api.close();
});

/** A completed scan written directly, at a chosen completion time. */
async function insertCompleted(db: Db, siteId: string, id: string, completedAt: Date, score = 50, trigger = 'scheduled') {
  await db('scans').insert({
    id,
    site_id: siteId,
    status: 'completed',
    score,
    trigger,
    started_at: new Date(completedAt.getTime() - 60_000),
    completed_at: completedAt,
  });
}

async function history(key: string, siteId: string, query = '') {
  return request(api.app).get(`/api/v1/sites/${siteId}/scans${query}`).set(bearer(key));
}

describe('GET /api/v1/sites/{siteId}/scans (the score history)', () => {
  it('lists only the completed scans, latest completedAt first, with their trigger, on one last page', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);
    const first = await startScan(api.db, site.id, { trigger: 'scheduled' });
    await completeScan({ db: api.db, queues: noQueue }, { scanId: first.id, score: 61.5, categories: [{ name: 'Speed', score: 70 }] });
    const second = await startScan(api.db, site.id);
    const { scan: latest } = await completeScan({ db: api.db, queues: noQueue }, { scanId: second.id, score: 80 });
    await markScanFailed(api.db, (await startScan(api.db, site.id)).id);
    await startScan(api.db, site.id);

    const res = await history(key, site.id);

    expect(res.status).toBe(200);
    const stored = await api.db('scans').where({ site_id: site.id, status: 'completed' }).orderBy('completed_at', 'desc');
    expect(stored).toHaveLength(2);
    expect(res.body).toEqual({
      data: {
        scans: stored.map((row) => ({
          id: row.id,
          score: row.score,
          status: 'completed',
          trigger: row.trigger,
          startedAt: row.started_at.toISOString(),
          completedAt: row.completed_at.toISOString(),
        })),
        nextCursor: null,
      },
    });
    expect(res.body.data.scans.map((s: { id: string }) => s.id)).toEqual([latest.id, first.id]);
    expect(res.body.data.scans[1].trigger).toBe('scheduled');
    expect(res.body.data.scans[0].trigger).toBe('manual');
  });

  it('answers an empty history for a site with no completed scan', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);
    await startScan(api.db, site.id);

    const res = await history(key, site.id);

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { scans: [], nextCursor: null } });
  });

  it('orders scans completed at the same instant by id, and pages through them without loss', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);
    const at = new Date('2026-03-01T12:00:00.000Z');
    const ids = ['scan_tie_a', 'scan_tie_b', 'scan_tie_c', 'scan_tie_d', 'scan_tie_e'].map((id) => `${id}_${site.id}`);
    for (const id of ids) await insertCompleted(api.db, site.id, id, at);

    const first = await history(key, site.id, '?limit=2');
    const second = await history(key, site.id, `?limit=2&cursor=${first.body.data.nextCursor}`);
    const third = await history(key, site.id, `?limit=2&cursor=${second.body.data.nextCursor}`);

    const walked = [first, second, third].flatMap((res) => res.body.data.scans.map((s: { id: string }) => s.id));
    expect(walked).toEqual([...ids].reverse());
    expect(third.body.data.nextCursor).toBeNull();
  });

  it('pages 100 at a time by default and says where the next page starts', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);
    const rows = Array.from({ length: 101 }, (_, i) => ({
      id: `scan_d${String(i).padStart(3, '0')}_${site.id}`,
      site_id: site.id,
      status: 'completed',
      score: i,
      started_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)),
      completed_at: new Date(Date.UTC(2026, 0, 1, 0, 1, i)),
    }));
    await api.db('scans').insert(rows);

    const first = await history(key, site.id);
    const last = await history(key, site.id, `?cursor=${first.body.data.nextCursor}`);

    expect(first.body.data.scans).toHaveLength(100);
    expect(first.body.data.scans[0].score).toBe(100);
    expect(typeof first.body.data.nextCursor).toBe('string');
    expect(last.body.data).toEqual({ scans: [expect.objectContaining({ id: rows[0]?.id, score: 0 })], nextCursor: null });
  });

  it('with since, lists only scans completed strictly after it', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);
    await insertCompleted(api.db, site.id, `scan_old_${site.id}`, new Date('2026-05-01T00:00:00.000Z'));
    await insertCompleted(api.db, site.id, `scan_edge_${site.id}`, new Date('2026-05-02T00:00:00.000Z'));
    await insertCompleted(api.db, site.id, `scan_new_${site.id}`, new Date('2026-05-02T00:00:00.001Z'));

    const utc = await history(key, site.id, '?since=2026-05-02T00:00:00Z');
    const offset = await history(key, site.id, `?since=${encodeURIComponent('2026-05-02T02:00:00.000+02:00')}`);

    for (const res of [utc, offset]) {
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual({ scans: [expect.objectContaining({ id: `scan_new_${site.id}` })], nextCursor: null });
    }
  });

  it('walks every page of a 250-scan history while scans complete, each scan exactly once, no gap, no repeat', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);
    const base = Date.UTC(2026, 1, 1);
    // Pairs share a completion instant, so ties by id are crossed by page boundaries too.
    const rows = Array.from({ length: 250 }, (_, i) => ({
      id: `scan_w${String(i).padStart(3, '0')}_${site.id}`,
      site_id: site.id,
      status: 'completed',
      score: i,
      started_at: new Date(base),
      completed_at: new Date(base + Math.floor(i / 2) * 1000),
    }));
    await api.db('scans').insert(rows);
    const expected = [...rows].sort((a, b) => b.completed_at.getTime() - a.completed_at.getTime() || (a.id < b.id ? 1 : -1)).map((r) => r.id);

    let completing = true;
    const completedMeanwhile: string[] = [];
    let firstCompleted: () => void = () => undefined;
    const producing = new Promise<void>((resolve) => {
      firstCompleted = resolve;
    });
    const producer = (async () => {
      while (completing) {
        const scan = await startScan(api.db, site.id);
        await completeScan({ db: api.db, queues: noQueue }, { scanId: scan.id, score: 99 });
        completedMeanwhile.push(scan.id);
        firstCompleted();
      }
    })();
    // The walk starts once the producer is completing scans, however loaded the machine is.
    await producing;
    const completedBeforeWalk = completedMeanwhile.length;
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    try {
      do {
        const res = await history(key, site.id, `?limit=7${cursor ? `&cursor=${cursor}` : ''}`);
        expect(res.status).toBe(200);
        seen.push(...res.body.data.scans.map((s: { id: string }) => s.id));
        cursor = res.body.data.nextCursor;
        pages += 1;
      } while (cursor !== null && pages < 100);
    } finally {
      completing = false;
      await producer;
    }

    expect(completedMeanwhile.length).toBeGreaterThan(completedBeforeWalk);
    expect(new Set(seen).size).toBe(seen.length);
    const walkedOriginals = seen.filter((id) => !completedMeanwhile.includes(id));
    expect(walkedOriginals).toEqual(expected);
    const stored = await api.db('scans').where({ site_id: site.id, status: 'completed' }).count<{ count: string }[]>('* as count');
    expect(Number(stored[0]?.count)).toBe(250 + completedMeanwhile.length);
  });

  it('refuses a key without read:scans with 403 naming the scope', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites', 'read:ai-monitor']);
    const site = await seedSite(api.db, accountId);

    const res = await history(key, site.id);

    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_scope');
    expect(res.body.error.message).toContain('read:scans');
  });

  it('answers not_found for another account’s site and for unknown ids of any shape', async () => {
    const mine = await seedAccount(api.db, ['read:scans']);
    const theirs = await seedAccount(api.db, ['read:scans']);
    const theirSite = await seedSite(api.db, theirs.accountId);
    await insertCompleted(api.db, theirSite.id, `scan_theirs_${theirSite.id}`, new Date());

    for (const siteId of [theirSite.id, 'site_missing', 'x', '%E2%98%83', 'a'.repeat(300), '%00']) {
      const res = await history(mine.key, siteId);
      expect({ siteId, status: res.status, code: res.body.error?.code }).toEqual({ siteId, status: 404, code: 'not_found' });
    }
  });

  it.each([
    ['limit', '?limit=0'],
    ['limit', '?limit=101'],
    ['limit', '?limit=abc'],
    ['limit', '?limit=1.5'],
    ['limit', '?limit=1e1'],
    ['limit', '?limit=%2010'],
    ['limit', '?limit='],
    ['limit', '?limit=5&limit=6'],
    ['cursor', '?cursor='],
    ['cursor', '?cursor=not*base64'],
    ['cursor', `?cursor=${Buffer.from('{"a":1}').toString('base64url')}`],
    ['cursor', `?cursor=${Buffer.from('["2026-13-01T00:00:00.000Z","scan_x"]').toString('base64url')}`],
    ['cursor', `?cursor=${Buffer.from('["2026-01-01T00:00:00.000Z","bad id"]').toString('base64url')}`],
    ['cursor', `?cursor=${Buffer.from('not json').toString('base64url')}`],
    ['since', '?since=yesterday'],
    ['since', '?since=2026-11-23'],
    ['since', '?since=2026-11-23T00:00:00'],
    ['since', '?since=2026-13-01T00:00:00Z'],
    ['since', '?since=2026-02-30T00:00:00Z'],
    ['since', '?since=2026-06-30T23:59:60Z'],
    ['since', '?since=2026-11-23T00:00:00 02:00'],
  ])('answers 400 invalid_query naming %s for %s, and nothing else changes', async (parameter, query) => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);

    const res = await history(key, site.id, query);

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_query');
    expect(res.body.error.message).toMatch(new RegExp(`^${parameter} must be `));
  });

  it('ignores unknown query parameters', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);

    const res = await history(key, site.id, '?page=2&order=asc&limit[x]=1');

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { scans: [], nextCursor: null } });
  });
});

describe('GET /api/v1/scans/{scanId}', () => {
  it('shows a completed scan with its categories and trigger', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);
    const started = await startScan(api.db, site.id, { trigger: 'scheduled' });
    const categories = [
      { name: 'Performance', score: 91.5 },
      { name: 'AI visibility', score: 64 },
    ];
    const { scan } = await completeScan({ db: api.db, queues: noQueue }, { scanId: started.id, score: 77.75, categories });

    const res = await request(api.app).get(`/api/v1/scans/${scan.id}`).set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: {
        scan: {
          id: scan.id,
          siteId: site.id,
          status: 'completed',
          score: 77.75,
          trigger: 'scheduled',
          startedAt: started.startedAt.toISOString(),
          completedAt: (scan.completedAt as Date).toISOString(),
          failedAt: null,
          categories,
        },
      },
    });
    expect((await api.db('scans').where({ id: scan.id }).first()).categories).toEqual(categories);
  });

  it('shows running and failed scans, which the history leaves out, with nulls where fields do not apply', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:scans']);
    const site = await seedSite(api.db, accountId);
    const running = await startScan(api.db, site.id);
    const failed = await markScanFailed(api.db, (await startScan(api.db, site.id)).id);

    const runningRes = await request(api.app).get(`/api/v1/scans/${running.id}`).set(bearer(key));
    const failedRes = await request(api.app).get(`/api/v1/scans/${failed.id}`).set(bearer(key));
    const historyRes = await history(key, site.id);

    expect(runningRes.body.data.scan).toEqual({
      id: running.id,
      siteId: site.id,
      status: 'running',
      score: null,
      trigger: 'manual',
      startedAt: running.startedAt.toISOString(),
      completedAt: null,
      failedAt: null,
      categories: [],
    });
    expect(failedRes.body.data.scan).toMatchObject({ status: 'failed', score: null, completedAt: null, failedAt: (failed.failedAt as Date).toISOString() });
    expect(historyRes.body.data.scans).toEqual([]);
  });

  it('answers not_found for another account’s scan and unknown ids, and 403 naming read:scans without the scope', async () => {
    const mine = await seedAccount(api.db, ['read:scans']);
    const noScope = await seedAccount(api.db, ['read:sites']);
    const theirs = await seedAccount(api.db, ['read:scans']);
    const theirScan = await startScan(api.db, (await seedSite(api.db, theirs.accountId)).id);

    for (const scanId of [theirScan.id, 'scan_missing', '%E2%98%83']) {
      const res = await request(api.app).get(`/api/v1/scans/${scanId}`).set(bearer(mine.key));
      expect({ scanId, status: res.status, body: res.body }).toEqual({
        scanId,
        status: 404,
        body: { error: { code: 'not_found', message: 'No scan with this id exists in your account.' } },
      });
    }
    const forbidden = await request(api.app).get(`/api/v1/scans/${theirScan.id}`).set(bearer(noScope.key));
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.message).toContain('read:scans');
  });
});
