import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, type Db } from '@svc/core';
import { claimAttempts, recordAttempts, type AttemptOutcome } from '@svc/core/dispatcher';
import { createIsolatedDatabase, uniqueTag } from '@svc/core/testing';
import { createDispatcherDb } from '../src/dispatcher-db.js';

/**
 * Issue 13: the dispatcher's batch statements must not keep a plan made while the tables were
 * small. With generic plans, a session whose first batches ran on a near-empty `deliveries` read
 * the whole table (sequential scans) for every batch ever after, so the cost per delivery grew
 * with the table.
 */
describe('the dispatcher pool plans each batch for itself', () => {
  let database: Awaited<ReturnType<typeof createIsolatedDatabase>>;
  let admin: Db;
  const tag = uniqueTag();
  const subscriptionId = `sub_plans_${tag}`;
  const outcome: AttemptOutcome = { startedAt: new Date(), durationMs: 3, statusCode: 200, error: null, responseBytes: Buffer.from('ok'), ok: true };

  beforeAll(async () => {
    database = await createIsolatedDatabase();
    admin = createDb(database.url, { poolMax: 2 });
    await admin.raw(`INSERT INTO accounts (id, name) VALUES (?, 'plans')`, [`acc_plans_${tag}`]);
    await admin.raw(`INSERT INTO webhook_subscriptions (id, account_id, url, events, secret) VALUES (?, ?, 'https://receiver.test/h', '{*}', repeat('a', 64))`, [
      subscriptionId,
      `acc_plans_${tag}`,
    ]);
  });
  afterAll(async () => {
    await admin.destroy();
    await database.drop();
  });

  /** `count` events with one delivery each, ids `<prefix>_<n>`; pending and due, or already delivered. */
  async function deliveries(prefix: string, count: number, status: 'pending' | 'delivered'): Promise<string[]> {
    await admin.raw(
      `INSERT INTO events (id, account_id, type, body) SELECT 'evt_' || ? || '_' || g, ?, 'scan.completed', '{}' FROM generate_series(1, ?::int) g`,
      [prefix, `acc_plans_${tag}`, count],
    );
    await admin.raw(
      `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at, finished_at)
       SELECT 'dlv_' || ? || '_' || g, 'evt_' || ? || '_' || g, ?, ?::text,
              CASE WHEN ?::text = 'pending' THEN 0 ELSE 1 END,
              CASE WHEN ?::text = 'pending' THEN clock_timestamp() END,
              CASE WHEN ?::text = 'pending' THEN NULL ELSE clock_timestamp() END
         FROM generate_series(1, ?::int) g`,
      [prefix, prefix, subscriptionId, status, status, status, status, count],
    );
    return Array.from({ length: count }, (_, i) => `dlv_${prefix}_${i + 1}`);
  }

  /** Claims and records the given deliveries' first attempts, `size` per batch, on the one session of `db`. */
  async function deliverInBatches(db: Db, ids: string[], size: number): Promise<void> {
    for (let i = 0; i < ids.length; i += size) {
      const claims = await claimAttempts(db, ids.slice(i, i + size).map((deliveryId) => ({ deliveryId, attempt: 1 })), 15_000);
      const claimed = claims.flatMap((claim) => (claim.claimed ? [claim.attempt] : []));
      expect(claimed).toHaveLength(Math.min(size, ids.length - i));
      const results = await recordAttempts(db, claimed.map((attempt) => ({ attempt, outcome })), [1_000]);
      expect(results.every((result) => result.kind === 'delivered')).toBe(true);
    }
  }

  /** Sequential scans of `deliveries` so far, with every session's counts flushed. */
  async function sequentialScans(db: Db): Promise<number> {
    await db.raw('SELECT pg_stat_force_next_flush()');
    await db.raw('SELECT 1');
    await admin.raw('SELECT pg_stat_force_next_flush()');
    await admin.raw('SELECT pg_stat_clear_snapshot()');
    const row = (await admin.raw(`SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'deliveries'`)).rows[0] as { seq_scan: string };
    return Number(row.seq_scan);
  }

  it('sets force_custom_plan on every connection of the pool', async () => {
    const db = createDispatcherDb(database.url, 2);
    try {
      const answers = await Promise.all([1, 2].map(() => db.raw('SHOW plan_cache_mode')));
      expect(answers.map((answer) => answer.rows[0].plan_cache_mode)).toEqual(['force_custom_plan', 'force_custom_plan']);
    } finally {
      await db.destroy();
    }
  });

  it('reads deliveries by id once the table has grown, after its first batches ran on a near-empty table', async () => {
    const db = createDispatcherDb(database.url, 1);
    try {
      // Ten batches on a near-empty table: past the sixth execution, where a generic plan is made.
      await deliverInBatches(db, await deliveries(`small_${tag}`, 40, 'pending'), 4);
      await deliveries(`history_${tag}`, 20_000, 'delivered');
      const due = await deliveries(`due_${tag}`, 100, 'pending');
      const before = await sequentialScans(db);
      await deliverInBatches(db, due, 20);
      expect((await sequentialScans(db)) - before).toBe(0);
    } finally {
      await db.destroy();
    }
  });
});
