import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb, createSite, getSiteDetail, getSiteDetailAsJson, markScanCompleted, markScanFailed, NotFoundError, startScan, type SiteDetail } from '../src/index.js';
import { seedAccount, TEST_DATABASE_URL } from '../src/testing/index.js';

const db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
afterAll(async () => {
  await db.destroy();
});

/** The site object exactly as the API presented it before Postgres wrote it (spec §4.2). */
function presented(site: SiteDetail): string {
  return JSON.stringify({
    id: site.id,
    domain: site.domain,
    name: site.name,
    status: site.status,
    createdAt: site.createdAt.toISOString(),
    latestScan: site.latestScan && {
      id: site.latestScan.id,
      score: site.latestScan.score,
      status: site.latestScan.status,
      completedAt: site.latestScan.completedAt.toISOString(),
    },
  });
}

describe('getSiteDetailAsJson (the site object written by Postgres)', () => {
  it('writes the same bytes as JSON.stringify of the presented detail, for awkward names and scores', async () => {
    const { accountId } = await seedAccount(db);
    const names = [null, 'Plain', 'Quote " back\\slash', 'Line\nbreak\ttab\u0001ctl', 'Ünïcode ☃ 🚀 / slash', '  '];
    const scores = [87.5, 0.1 + 0.2, 100, 0, 42.125, -3.75, 1234567.875];
    for (const [i, name] of names.entries()) {
      const site = await createSite(db, accountId, { domain: `json-${i}.example.com`, name, status: i % 2 ? 'inactive' : 'active' });
      if (i > 0) {
        const scan = await startScan(db, site.id);
        await markScanCompleted(db, scan.id, scores[i % scores.length]!);
        await markScanFailed(db, (await startScan(db, site.id)).id);
      }
      const json = await getSiteDetailAsJson(db, accountId, site.id);
      expect(json).toBe(presented(await getSiteDetail(db, accountId, site.id)));
    }
  });

  it('names the newest completed scan, as getSiteDetail does, and null when none completed', async () => {
    const { accountId } = await seedAccount(db);
    const site = await createSite(db, accountId, { domain: 'latest.example.com' });
    await startScan(db, site.id);
    expect(JSON.parse(await getSiteDetailAsJson(db, accountId, site.id)).latestScan).toBeNull();

    const first = await startScan(db, site.id);
    await markScanCompleted(db, first.id, 10);
    const second = await startScan(db, site.id);
    await markScanCompleted(db, second.id, 20);
    await startScan(db, site.id);

    const parsed = JSON.parse(await getSiteDetailAsJson(db, accountId, site.id));
    expect(parsed.latestScan).toMatchObject({ id: second.id, score: 20, status: 'completed' });
    expect(await getSiteDetailAsJson(db, accountId, site.id)).toBe(presented(await getSiteDetail(db, accountId, site.id)));
  });

  it('answers not_found for another account’s site and for an unknown id', async () => {
    const owner = await seedAccount(db);
    const other = await seedAccount(db);
    const site = await createSite(db, owner.accountId, { domain: 'mine.example.com' });

    await expect(getSiteDetailAsJson(db, other.accountId, site.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(getSiteDetailAsJson(db, owner.accountId, 'site_nope')).rejects.toBeInstanceOf(NotFoundError);
    expect(db.client.pool.numUsed()).toBe(0);
  });
});
