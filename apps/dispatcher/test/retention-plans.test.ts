import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Db } from '@svc/core';
import { purgeExpiredHistory } from '@svc/core/dispatcher';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

/**
 * The retention purge's events statement keeps an event only while a delivery of it is left
 * (`NOT EXISTS … deliveries.event_id`), and deleting an event makes PostgreSQL look up its
 * deliveries for the ON DELETE CASCADE. Both read deliveries by event_id alone: beside a large
 * deliveries table, each must be an index lookup, not a read of the whole table per batch (or
 * per event). Here the plan is the behaviour, so the test reads the plans.
 */
const DELIVERIES = 40_000;
const EXPIRED_EVENTS = 600;

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h.close();
});

interface SentQuery {
  sql: string;
  bindings: unknown[];
}

/** A bound value as an SQL literal. */
function literal(db: Db, value: unknown): string {
  return db.raw('?', [value] as never).toQuery();
}

/** The custom plan (values known, as the purger's unnamed statements are planned) of a statement sent earlier. */
async function planOf(tx: Db, statement: SentQuery): Promise<string> {
  await tx.raw(`PREPARE retention_plan AS ${statement.sql}`);
  await tx.raw('SET LOCAL plan_cache_mode = force_custom_plan');
  const result = await tx.raw(`EXPLAIN EXECUTE retention_plan(${statement.bindings.map((value) => literal(tx, value)).join(', ')})`);
  await tx.raw('DEALLOCATE retention_plan');
  return (result.rows as Array<{ 'QUERY PLAN': string }>).map((row) => row['QUERY PLAN']).join('\n');
}

/** Sequential scans of `deliveries` this transaction has made so far. */
async function deliveriesSeqScans(tx: Db): Promise<number> {
  const { rows } = await tx.raw(`SELECT seq_scan::int AS n FROM pg_stat_xact_user_tables WHERE relid = 'public.deliveries'::regclass`);
  return (rows as Array<{ n: number }>)[0]?.n ?? 0;
}

describe(`the events purge beside ${DELIVERIES} deliveries`, () => {
  it('finds whether an event has a delivery left, and its deliveries when it goes, through an index on event_id', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/ok/retention-plans');
    const tx = (await h.db.transaction()) as unknown as Db & { rollback(): Promise<void> };
    try {
      // A busy service: many recent events, each with its delivery, then ANALYZE (rolled back with the rest).
      await tx.raw(
        `INSERT INTO events (id, account_id, type, body, created_at, fanned_out_at)
         SELECT 'evt_recent_' || g, ?::text, 'scan.completed', '{}', now(), now() FROM generate_series(1, ?::int) g`,
        [tenant.accountId, DELIVERIES],
      );
      await tx.raw(
        `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, finished_at)
         SELECT 'dlv_recent_' || g, 'evt_recent_' || g, ?::text, 'delivered', 1, now() FROM generate_series(1, ?::int) g`,
        [sub.id, DELIVERIES],
      );
      // Expired events no subscription matched: the purge deletes them.
      await tx.raw(
        `INSERT INTO events (id, account_id, type, body, created_at, fanned_out_at)
         SELECT 'evt_expired_' || g, ?::text, 'scan.completed', '{}', now() - interval '40 days', now() - interval '40 days'
           FROM generate_series(1, ?::int) g`,
        [tenant.accountId, EXPIRED_EVENTS],
      );
      await tx.raw('ANALYZE events, deliveries');

      const sent: SentQuery[] = [];
      const listener = (query: SentQuery) => sent.push(query);
      h.db.on('query', listener);
      let scansDuringPurge: number;
      let purged: Awaited<ReturnType<typeof purgeExpiredHistory>>;
      try {
        const scansBefore = await deliveriesSeqScans(tx);
        purged = await purgeExpiredHistory(tx, { retentionDays: 30, batchSize: 500, maxBatches: 1 });
        scansDuringPurge = (await deliveriesSeqScans(tx)) - scansBefore;
      } finally {
        h.db.off('query', listener);
      }
      const eventsStatement = sent.find((query) => /DELETE FROM events/.test(query.sql));
      expect(eventsStatement).toBeDefined();
      const plan = await planOf(tx, eventsStatement!);

      expect(purged.events).toBe(500);
      expect(plan).toMatch(/Index (Only )?Scan using deliveries_event_id_idx on deliveries/);
      expect(plan).not.toMatch(/Seq Scan on deliveries/);
      // The cascade's lookups of each deleted event's deliveries included.
      expect(scansDuringPurge).toBe(0);
    } finally {
      await tx.rollback();
    }
  });
});
