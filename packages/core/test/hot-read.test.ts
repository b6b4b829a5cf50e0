import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb, getSiteDetail, listSites, listSubscriptions, createSubscription, NotFoundError } from '../src/index.js';
import { hotRead, runHotRead } from '../src/db/hot-read.js';
import { seedAccount, seedSite, TEST_DATABASE_URL } from '../src/testing/index.js';

// A pool of two connections: a hot read that kept its connection would starve the next ones.
const db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
afterAll(async () => {
  await db.destroy();
});

describe('hot reads (named statements straight on a pooled pg connection)', () => {
  it('numbers the placeholders for pg once, keeping the knex text for transactions', () => {
    const read = hotRead('svc_test_numbering', 'SELECT ? AS a, ? AS b WHERE ? IS NOT NULL');
    expect(read.pgText).toBe('SELECT $1 AS a, $2 AS b WHERE $3 IS NOT NULL');
    expect(read.sql).toBe('SELECT ? AS a, ? AS b WHERE ? IS NOT NULL');
  });

  it('serves many more reads than the pool has connections, concurrently, and gives every connection back', async () => {
    const { accountId } = await seedAccount(db);
    const site = await seedSite(db, accountId, { name: 'Hot' });

    const details = await Promise.all(Array.from({ length: 25 }, () => getSiteDetail(db, accountId, site.id)));

    expect(details.every((d) => d.id === site.id && d.name === 'Hot' && d.createdAt instanceof Date)).toBe(true);
    expect(db.client.pool.numUsed()).toBe(0);
  });

  it('gives the connection back when the statement fails, and the next read works', async () => {
    const failing = hotRead('svc_test_failing', 'SELECT 1 / (? - 1) AS x');
    await expect(runHotRead(db, failing, [1])).rejects.toThrow(/division by zero/);
    await expect(runHotRead(db, failing, [1])).rejects.toThrow(/division by zero/);
    await expect(runHotRead(db, failing, [1])).rejects.toThrow(/division by zero/);

    expect(db.client.pool.numUsed()).toBe(0);
    await expect(runHotRead<{ x: number }>(db, failing, [2])).resolves.toEqual([{ x: 1 }]);
  });

  it('inside a transaction, reads on the transaction connection and sees its uncommitted rows', async () => {
    const { accountId } = await seedAccount(db);

    const seen = await db.transaction(async (trx) => {
      await createSubscription(trx, accountId, { url: 'https://example.com/hook', events: ['scan.completed'] });
      await trx('sites').insert({ id: `site_hot_${accountId}`, account_id: accountId, domain: 'hot.example.com', name: null, status: 'active' });
      return { subscriptions: await listSubscriptions(trx, accountId), sites: await listSites(trx, accountId) };
    });

    expect(seen.subscriptions).toHaveLength(1);
    expect(seen.sites.map((s) => s.domain)).toEqual(['hot.example.com']);
    expect(await listSubscriptions(db, accountId)).toHaveLength(1);
  });

  it('still answers not_found for another account’s site', async () => {
    const owner = await seedAccount(db);
    const other = await seedAccount(db);
    const site = await seedSite(db, owner.accountId);

    await expect(getSiteDetail(db, other.accountId, site.id)).rejects.toBeInstanceOf(NotFoundError);
    expect(db.client.pool.numUsed()).toBe(0);
  });
});
