import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, loadConfig, dbBoundsOf, type Db } from '../src/index.js';
import { TEST_DATABASE_URL, uniqueTag } from '../src/testing/index.js';

describe('the bounds of every statement of the service’s pools', () => {
  let bounded: Db;
  let other: Db;
  const table = `bounds_${uniqueTag()}`;

  beforeAll(async () => {
    bounded = createDb(TEST_DATABASE_URL, { poolMax: 2, bounds: dbBoundsOf(loadConfig({ DB_STATEMENT_TIMEOUT_MS: '300', DB_LOCK_TIMEOUT_MS: '100' })) });
    other = createDb(TEST_DATABASE_URL, { poolMax: 2 });
    await other.schema.createTable(table, (t) => {
      t.integer('id').primary();
    });
    await other(table).insert({ id: 1 });
  });
  afterAll(async () => {
    await other.schema.dropTableIfExists(table);
    await Promise.all([bounded.destroy(), other.destroy()]);
  });

  it('cancels a statement that runs past DB_STATEMENT_TIMEOUT_MS, and the connection serves the next one', async () => {
    await expect(bounded.raw('SELECT pg_sleep(5)')).rejects.toMatchObject({ code: '57014' });
    expect((await bounded.raw('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('fails a statement that waits for another transaction’s row lock past DB_LOCK_TIMEOUT_MS, leaving the row as it was', async () => {
    const holder = await other.transaction();
    try {
      await holder(table).where({ id: 1 }).forUpdate().first();
      await expect(bounded(table).where({ id: 1 }).update({ id: 2 })).rejects.toMatchObject({ code: '55P03' });
    } finally {
      await holder.rollback();
    }
    expect(await other(table).select('id')).toEqual([{ id: 1 }]);
  });

  it('lets the migrations run unbounded (building an index takes as long as it takes)', async () => {
    const unbounded = createDb(TEST_DATABASE_URL, { poolMax: 1, bounds: { statementTimeoutMs: 0, lockTimeoutMs: 0 } });
    try {
      const settings = await unbounded.raw(`SELECT current_setting('statement_timeout') AS statement, current_setting('lock_timeout') AS lock`);
      expect(settings.rows).toEqual([{ statement: '0', lock: '0' }]);
    } finally {
      await unbounded.destroy();
    }
  });
});
