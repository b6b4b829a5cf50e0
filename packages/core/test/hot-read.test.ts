import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb, NotFoundError } from '../src/index.js';
import { getSiteDetailAsJson, listSitesAsJsonArray, listSubscriptionsAsJsonArray, createSubscription } from '../src/operator.js';
import { hotRead, isoFromJsonUtc, isoUtc, jsonUtc, runHotRead } from '../src/db/hot-read.js';
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

  it('is seen by knex\'s query event as any statement knex sends (tests that count queries rely on it)', async () => {
    const seen: Array<{ sql: string; bindings: unknown[]; options?: { name?: string } }> = [];
    const listener = (query: { sql: string; bindings: unknown[]; options?: { name?: string } }) => seen.push(query);
    db.on('query', listener);
    try {
      await runHotRead(db, hotRead('svc_test_seen', 'SELECT ?::int AS x'), [7]);
    } finally {
      db.off('query', listener);
    }

    expect(seen).toEqual([{ method: 'raw', sql: 'SELECT ?::int AS x', bindings: [7], options: { name: 'svc_test_seen' } }]);
  });

  it('serves many more reads than the pool has connections, concurrently, and gives every connection back', async () => {
    const { accountId } = await seedAccount(db);
    const site = await seedSite(db, accountId, { name: 'Hot' });

    const details = await Promise.all(Array.from({ length: 25 }, async () => JSON.parse(await getSiteDetailAsJson(db, accountId, site.id)) as { id: string; name: string }));

    expect(details.every((d) => d.id === site.id && d.name === 'Hot')).toBe(true);
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
      return { subscriptions: JSON.parse(await listSubscriptionsAsJsonArray(trx, accountId)) as unknown[], sites: JSON.parse(await listSitesAsJsonArray(trx, accountId)) as Array<{ domain: string }> };
    });

    expect(seen.subscriptions).toHaveLength(1);
    expect(seen.sites.map((s) => s.domain)).toEqual(['hot.example.com']);
    expect(JSON.parse(await listSubscriptionsAsJsonArray(db, accountId))).toHaveLength(1);
  });

  it('still answers not_found for another account’s site', async () => {
    const owner = await seedAccount(db);
    const other = await seedAccount(db);
    const site = await seedSite(db, owner.accountId);

    await expect(getSiteDetailAsJson(db, other.accountId, site.id)).rejects.toBeInstanceOf(NotFoundError);
    expect(db.client.pool.numUsed()).toBe(0);
  });
});

describe('times as JSON text from Postgres (jsonUtc), completed in the API (isoFromJsonUtc)', () => {
  it('give exactly the text to_char gives, for every fraction length and whatever the DateStyle', async () => {
    const fixed = [
      '2026-11-23 11:21:08+00',
      '2026-11-23 11:21:08.2+00',
      '2026-11-23 11:21:08.23+00',
      '2026-11-23 11:21:08.236+00',
      '2026-11-23 11:21:08.2301+00',
      '2026-11-23 11:21:08.99999+00',
      '2026-12-31 23:59:59.999999+00',
      '2026-03-29 01:30:00.5+02',
      '0001-01-01 00:00:00+00',
      '9999-12-31 23:59:59.999+00',
    ];
    // And 500 random instants with microseconds, 1970–2100.
    const random = Array.from({ length: 500 }, () => new Date(Math.floor(Math.random() * 4_102_444_800_000)).toISOString().replace('Z', `${String(Math.floor(Math.random() * 1000)).padStart(3, '0')}+00`));
    const rows = await db.transaction(async (tx) => {
      await tx.raw(`SET LOCAL DateStyle = 'SQL, DMY'`);
      const result = await tx.raw(`SELECT ${jsonUtc('t')} AS json, ${isoUtc('t')} AS iso FROM unnest(?::timestamptz[]) AS t`, [[...fixed, ...random]]);
      return result.rows as Array<{ json: string; iso: string }>;
    });

    expect(rows).toHaveLength(fixed.length + random.length);
    const mismatches = rows.filter((row) => isoFromJsonUtc(row.json) !== row.iso);
    expect(mismatches).toEqual([]);
    expect(isoFromJsonUtc(rows[3]!.json)).toBe('2026-11-23T11:21:08.236Z');
    expect(isoFromJsonUtc(rows[7]!.json)).toBe('2026-03-28T23:30:00.500Z');
  });

  it('take the general path for a year of five digits, still as to_char writes it', async () => {
    const { rows } = await db.raw(`SELECT ${jsonUtc('t')} AS json, ${isoUtc('t')} AS iso FROM unnest(?::timestamptz[]) AS t`, [['10000-01-01 00:00:00.5+00', '12345-06-07 08:09:10+00']]);

    for (const row of rows as Array<{ json: string; iso: string }>) expect(isoFromJsonUtc(row.json)).toBe(row.iso);
    expect(() => isoFromJsonUtc('"not a time"')).toThrow(/not a time as jsonUtc writes one/);
  });
});
