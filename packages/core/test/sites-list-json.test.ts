import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb } from '../src/index.js';
import { listSitesAsJsonArray } from '../src/operator.js';
import { seedAccount, seedSite, TEST_DATABASE_URL } from '../src/testing/index.js';

const db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
afterAll(async () => {
  await db.destroy();
});

/** The account's sites as the API presented them before Postgres wrote them (spec §4.1), newest first, from the rows themselves. */
async function presented(accountId: string, limit = 100): Promise<string> {
  const rows = await db('sites').where({ account_id: accountId }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(limit);
  return JSON.stringify(rows.map((row) => ({ id: row.id, domain: row.domain, name: row.name, status: row.status, createdAt: (row.created_at as Date).toISOString() })));
}

describe('listSitesAsJsonArray (the listed sites written by Postgres, as one array)', () => {
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

    const json = await listSitesAsJsonArray(db, accountId);

    expect(json).toBe(await presented(accountId));
    const parsed = JSON.parse(json) as Array<{ id: string; name: string | null; createdAt: string }>;
    expect(parsed).toHaveLength(names.length);
    expect(parsed.find((site) => site.id === made[0]!.id)?.name).toBeNull();
    expect(parsed.find((site) => site.id === made[1]!.id)?.createdAt).toBe('2026-01-02T03:04:05.000Z');
  });

  it('answers an empty array for an account without sites, and the newest `limit` otherwise, newest first even when they share a creation time', async () => {
    const empty = await seedAccount(db);
    const { accountId } = await seedAccount(db);
    const made: Array<{ id: string }> = [];
    for (let i = 0; i < 5; i++) made.push(await seedSite(db, accountId));
    // Three on one instant: the id breaks the tie, as the index orders them.
    await db('sites').whereIn('id', made.slice(1, 4).map((site) => site.id)).update({ created_at: new Date('2030-01-01T00:00:00.000Z') });

    expect(await listSitesAsJsonArray(db, empty.accountId)).toBe('[]');
    const two = await listSitesAsJsonArray(db, accountId, 2);
    expect(two).toBe(await presented(accountId, 2));
    expect(await listSitesAsJsonArray(db, accountId, 4)).toBe(await presented(accountId, 4));
    expect((JSON.parse(two) as Array<{ id: string }>).map((site) => site.id)).toEqual(
      made.slice(1, 4).map((site) => site.id).sort().reverse().slice(0, 2),
    );
  });
});
