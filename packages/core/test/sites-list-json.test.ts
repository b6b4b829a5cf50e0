import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb, listSitesAsJson, listSitesAsShown, type ShownSiteSummary } from '../src/index.js';
import { seedAccount, seedSite, TEST_DATABASE_URL } from '../src/testing/index.js';

const db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
afterAll(async () => {
  await db.destroy();
});

/** A listed site exactly as the API presented it before Postgres wrote it (spec §4.1). */
function presented(site: ShownSiteSummary): string {
  return JSON.stringify({ id: site.id, domain: site.domain, name: site.name, status: site.status, createdAt: site.createdAt });
}

describe('listSitesAsJson (each listed site written by Postgres)', () => {
  it('writes the same sites, in the same order, with the same bytes as JSON.stringify of the presented list', async () => {
    const { accountId } = await seedAccount(db);
    const other = await seedAccount(db);
    const names = ['quote"d', 'back\\slash', 'new\nline\ttab', 'control\u0001\u001f', 'ünï ☃ 😀', '</script>', 'del\u007f', 'plain'];
    const made: Array<{ id: string }> = [];
    for (const name of names) made.push(await seedSite(db, accountId, { name }));
    await seedSite(db, other.accountId, { name: 'not mine' });
    // A site without a name, one on a whole second, one inactive.
    await db('sites').where({ id: made[0]!.id }).update({ name: null });
    await db('sites').where({ id: made[1]!.id }).update({ created_at: new Date('2026-01-02T03:04:05.000Z') });
    await db('sites').where({ id: made[2]!.id }).update({ status: 'inactive' });

    const json = await listSitesAsJson(db, accountId);
    const shown = await listSitesAsShown(db, accountId);

    expect(json).toHaveLength(names.length);
    expect(json).toEqual(shown.map(presented));
    const parsed = JSON.parse(`[${json.join(',')}]`) as Array<{ id: string; name: string | null; createdAt: string }>;
    expect(parsed.find((site) => site.id === made[0]!.id)?.name).toBeNull();
    expect(parsed.find((site) => site.id === made[1]!.id)?.createdAt).toBe('2026-01-02T03:04:05.000Z');
    expect(parsed.map((site) => site.id)).not.toContain(undefined);
  });

  it('answers no rows for an account without sites, and at most `limit` otherwise', async () => {
    const empty = await seedAccount(db);
    const { accountId } = await seedAccount(db);
    for (let i = 0; i < 3; i++) await seedSite(db, accountId);

    expect(await listSitesAsJson(db, empty.accountId)).toEqual([]);
    expect(await listSitesAsJson(db, accountId, 2)).toHaveLength(2);
  });
});
