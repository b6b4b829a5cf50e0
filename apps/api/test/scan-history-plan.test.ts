import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { scanHistorySql } from '@svc/core/operator';
import { seedAccount, seedSite } from '@svc/core/testing';
import { createTestApi, type TestApi } from './support.js';

let api: TestApi;
let accountId: string;
let siteId: string;

/** Issue 9: a site with 100,000 scans answers any history page from an index, without sorting the history. */
beforeAll(async () => {
  api = createTestApi();
  ({ accountId } = await seedAccount(api.db, ['read:scans']));
  siteId = (await seedSite(api.db, accountId)).id;
  await api.db.raw(
    `INSERT INTO scans (id, site_id, status, score, trigger, started_at, completed_at)
     SELECT 'scan_plan' || g || '_' || ?::text, ?::text, 'completed', g % 100, 'scheduled',
            timestamptz '2020-01-01' + make_interval(secs => g), timestamptz '2020-01-01' + make_interval(secs => g + 30)
       FROM generate_series(1, 100000) g`,
    [siteId, siteId],
  );
  await api.db.raw('ANALYZE scans');
}, 120_000);
afterAll(async () => {
  await api.db('sites').where({ id: siteId }).delete();
  await api.close();
});

/** The plan of one history statement, as a generic plan would run it (the statements are prepared). */
async function plan(hasSince: boolean, hasAfter: boolean, bindings: unknown[]): Promise<string> {
  const { sql } = scanHistorySql(hasSince, hasAfter);
  return api.db.transaction(async (tx) => {
    await tx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
    const result = await tx.raw(`EXPLAIN ${sql}`, bindings as never);
    return (result.rows as Array<{ 'QUERY PLAN': string }>).map((row) => row['QUERY PLAN']).join('\n');
  });
}

describe('the score history of a site with 100,000 scans', () => {
  it.each([
    ['the first page', false, false, () => [101, siteId, accountId]],
    ['a page after a cursor deep in the history', false, true, () => [new Date('2020-01-01T05:00:00Z'), 'scan_plan18000', 101, siteId, accountId]],
    ['a page with since and a cursor', true, true, () => [new Date('2020-01-01T00:10:00Z'), new Date('2020-01-01T05:00:00Z'), 'scan_plan18000', 101, siteId, accountId]],
  ])('reads %s as a range of scans_site_history_idx, with no sort', async (_label, hasSince, hasAfter, bindings) => {
    const text = await plan(hasSince, hasAfter, bindings());

    expect(text).toMatch(/Index (Only )?Scan using scans_site_history_idx on scans/);
    expect(text).not.toMatch(/Sort/);
    // since and the cursor bound the range read; as a filter they would walk the history from its top.
    expect(text).not.toMatch(/Filter: .*completed_at/);
    expect(text).toMatch(/Limit/);
  });
});
