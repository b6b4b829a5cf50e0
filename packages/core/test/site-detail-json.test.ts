import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb, NotFoundError } from '../src/index.js';
import { createSite, getSiteDetailAsJson, markScanCompleted, markScanFailed, startScan } from '../src/operator.js';
import { seedAccount, TEST_DATABASE_URL } from '../src/testing/index.js';

const db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
afterAll(async () => {
  await db.destroy();
});

/** The site object as JSON.stringify writes it (spec §4.2), from the rows read through knex. */
async function presented(siteId: string): Promise<string> {
  const site = (await db('sites').where({ id: siteId }).first())!;
  const scan = await db('scans')
    .where({ site_id: siteId, status: 'completed' })
    .orderBy([{ column: 'completed_at', order: 'desc' }, { column: 'id', order: 'desc' }])
    .first();
  return JSON.stringify({
    id: site.id,
    domain: site.domain,
    name: site.name,
    status: site.status,
    createdAt: site.created_at.toISOString(),
    latestScan: scan ? { id: scan.id, score: Number(scan.score), status: 'completed', completedAt: (scan.completed_at as Date).toISOString() } : null,
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
      expect(json).toBe(await presented(site.id));
    }
  });

  it('names the newest completed scan, and null when none completed', async () => {
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
    expect(await getSiteDetailAsJson(db, accountId, site.id)).toBe(await presented(site.id));
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
