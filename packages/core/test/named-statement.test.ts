import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb } from '../src/index.js';
import { runNamedStatement, toPositional } from '../src/db/named-statement.js';
import { TEST_DATABASE_URL } from '../src/testing/index.js';

// A pool of two connections: a statement that kept its connection would starve the next ones.
const db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
afterAll(async () => {
  await db.destroy();
});

describe('named statements (a producer’s one statement, bound by name, converted once)', () => {
  it('numbers every occurrence of a known binding, leaving casts, string literals and unknown names alone', () => {
    const { text, order } = toPositional(
      `SELECT :a::text[] AS a, to_char(now(), 'HH24:MI:SS') AS t, :b AS b, (:a)::text AS again, :unknown AS u`,
      ['a', 'b'],
    );

    expect(text).toBe(`SELECT $1::text[] AS a, to_char(now(), 'HH24:MI:SS') AS t, $2 AS b, ($3)::text AS again, :unknown AS u`);
    expect(order).toEqual(['a', 'b', 'a']);
  });

  it('returns the same rows knex would, for the same SQL and bindings', async () => {
    const sql = `SELECT :n::int + 1 AS next, :items::text[] AS items, to_char(timestamp '2026-01-02 03:04:05', 'HH24:MI:SS') AS at, :n::int AS again`;
    const bindings = { n: 41, items: ['a', 'b,c', 'd"e'] };

    const direct = await runNamedStatement(db, 'svc_test_named_same_rows', sql, bindings);
    const viaKnex = (await db.raw(sql, bindings)).rows;

    expect(direct).toEqual([{ next: 42, items: ['a', 'b,c', 'd"e'], at: '03:04:05', again: 41 }]);
    expect(direct).toEqual(viaKnex);
  });

  it('is seen by knex\'s query event as any statement knex sends', async () => {
    const seen: Array<{ sql: string; bindings: unknown[] }> = [];
    const listener = (query: { sql: string; bindings: unknown[] }) => seen.push(query);
    db.on('query', listener);
    try {
      await runNamedStatement(db, 'svc_test_named_seen', 'SELECT :x::int AS x', { x: 3 });
    } finally {
      db.off('query', listener);
    }

    expect(seen).toEqual([{ method: 'raw', sql: 'SELECT :x::int AS x', bindings: [3], options: { name: 'svc_test_named_seen' } }]);
  });

  it('refuses another SQL text under a name already used, and an undefined binding, before sending anything', async () => {
    await runNamedStatement(db, 'svc_test_named_once', 'SELECT :x::int AS x', { x: 1 });

    await expect(runNamedStatement(db, 'svc_test_named_once', 'SELECT :x::int + 1 AS x', { x: 1 })).rejects.toThrow(/another SQL text/);
    await expect(runNamedStatement(db, 'svc_test_named_once', 'SELECT :x::int AS x', { x: undefined })).rejects.toThrow(/binding x is undefined/);
    expect(db.client.pool.numUsed()).toBe(0);
  });

  it('gives the connection back when the statement fails, and the next call works', async () => {
    const sql = 'SELECT 1 / (:d::int - 1) AS x';
    for (let i = 0; i < 3; i++) await expect(runNamedStatement(db, 'svc_test_named_failing', sql, { d: 1 })).rejects.toThrow(/division by zero/);

    expect(db.client.pool.numUsed()).toBe(0);
    await expect(runNamedStatement(db, 'svc_test_named_failing', sql, { d: 2 })).resolves.toEqual([{ x: 1 }]);
  });

  it('inside a transaction, runs on the transaction’s connection: its work is undone with it', async () => {
    const table = `named_statement_story_${process.pid}`;
    await db.raw(`CREATE TABLE IF NOT EXISTS ${table} (v int)`);
    try {
      await expect(
        db.transaction(async (trx) => {
          await runNamedStatement(trx, 'svc_test_named_in_tx', `INSERT INTO ${table} (v) SELECT :v::int RETURNING v`, { v: 7 });
          const [seen] = (await trx.raw(`SELECT count(*)::int AS n FROM ${table}`)).rows as Array<{ n: number }>;
          expect(seen?.n).toBe(1);
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');

      const [after] = (await db.raw(`SELECT count(*)::int AS n FROM ${table}`)).rows as Array<{ n: number }>;
      expect(after?.n).toBe(0);
    } finally {
      await db.raw(`DROP TABLE IF EXISTS ${table}`);
    }
  });
});
