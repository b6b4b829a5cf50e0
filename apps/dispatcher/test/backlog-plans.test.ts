import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId, type Db } from '@svc/core';
import { claimAttempts, findOverdueDeliveries, recordAttempts } from '@svc/core/dispatcher';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { fanOutCollecting } from '@svc/core/testing';

/**
 * ADR 11: the batched claim, the batched record and the fan-out's re-queue cost what their batch
 * holds, not what the backlog holds. Statistics taken while few deliveries were pending (an
 * ANALYZE in a quiet moment), then a backlog of pending deliveries: each statement still finds
 * its rows by key, never by scanning the pending ones (deliveries_due_idx, deliveries_one_pending_idx).
 * The claim's UPDATE reads each attempt's delivery by primary key, never the deliveries of a
 * subscription: statistics from a moment when every subscription had a few deliveries, then one
 * subscription with a long history, must not make a claim batch walk that history.
 */
const BACKLOG = 20_000;

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h.close();
});

/** A bound value as an SQL literal (a Date inside an array as its ISO text). */
function literal(tx: Db, value: unknown): string {
  const plain = Array.isArray(value) ? value.map((v) => (v instanceof Date ? v.toISOString() : v)) : value;
  return tx.raw('?', [plain] as never).toQuery();
}

let statements = 0;

/**
 * The plan of the last statement `run` sends, run and rolled back inside `tx`: the generic plan
 * (the one a prepared statement keeps once it has run five times), or the custom plan (values
 * known, as the dispatcher's pool plans every execution: createDispatcherDb).
 */
async function planOf(tx: Db, run: () => Promise<unknown>, mode: 'generic' | 'custom' = 'generic'): Promise<string> {
  const sent: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (query: { sql: string; bindings: unknown[] }) => sent.push(query);
  h.db.on('query', listener);
  try {
    await tx.raw('SAVEPOINT planned');
    await run();
    await tx.raw('ROLLBACK TO SAVEPOINT planned');
  } finally {
    h.db.off('query', listener);
  }
  const statement = sent.filter((query) => !/SAVEPOINT/.test(query.sql)).at(-1)!;
  const name = `backlog_plan_${(statements += 1)}`;
  await tx.raw(`PREPARE ${name} AS ${statement.sql}`);
  await tx.raw(`SET LOCAL plan_cache_mode = force_${mode}_plan`);
  const result = await tx.raw(`EXPLAIN EXECUTE ${name}(${statement.bindings.map((value) => literal(tx, value)).join(', ')})`);
  await tx.raw(`DEALLOCATE ${name}`);
  return (result.rows as Array<{ 'QUERY PLAN': string }>).map((row) => row['QUERY PLAN']).join('\n');
}

/**
 * Private copies of the delivery tables (same columns and indexes) shadow the shared ones in
 * `tx`, so their statistics can be those of a quiet moment whatever other tests do.
 */
async function shadowTables(tx: Db): Promise<void> {
  await tx.raw('SET LOCAL search_path = pg_temp, public');
  for (const table of ['events', 'deliveries', 'delivery_attempts', 'webhook_subscriptions']) {
    await tx.raw(`CREATE TEMP TABLE ${table} (LIKE public.${table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) ON COMMIT DROP`);
    const indexes = await tx.raw('SELECT indexdef FROM pg_indexes WHERE schemaname = ? AND tablename = ?', ['public', table]);
    for (const { indexdef } of indexes.rows as Array<{ indexdef: string }>) {
      await tx.raw(indexdef.replace(` ON public.${table} `, ` ON pg_temp.${table} `));
    }
  }
}

describe(`claims, records and fan-outs beside ${BACKLOG} pending deliveries the statistics do not know of`, () => {
  it('find their deliveries by key', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/ok/backlog-plans');
    const down = await tenant.subscribe('/ok/backlog-plans-down');
    const tx = await h.db.transaction();
    try {
      // 20,000 finished deliveries, none pending, then ANALYZE.
      await shadowTables(tx as unknown as Db);
      await tx.raw('INSERT INTO pg_temp.webhook_subscriptions SELECT * FROM public.webhook_subscriptions WHERE id = ANY(?)', [[sub.id, down.id]]);
      await tx.raw(
        `INSERT INTO pg_temp.deliveries (id, event_id, subscription_id, status, attempt_count, finished_at)
         SELECT 'dlv_done_' || g, 'evt_done_' || g, ?::text, 'delivered', 1, now() FROM generate_series(1, ?::int) g`,
        [down.id, BACKLOG],
      );
      await tx.raw('ANALYZE pg_temp.deliveries, pg_temp.events, pg_temp.webhook_subscriptions');
      const eventIds = Array.from({ length: BACKLOG }, () => newId('evt'));
      await tx.raw(
        `INSERT INTO pg_temp.events (id, account_id, type, body, fanned_out_at)
         SELECT e.id, ?::text, 'scan.completed', '{}', now() FROM unnest(?::text[]) AS e(id)`,
        [tenant.accountId, eventIds],
      );
      const rows = eventIds.slice(0, 20).map((eventId) => ({ id: newId('dlv'), event_id: eventId, subscription_id: sub.id, status: 'pending', attempt_count: 0 }));
      await tx.raw(
        `INSERT INTO pg_temp.deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
         SELECT r.id, r.event_id, ?::text, 'pending', 0, now() FROM unnest(?::text[], ?::text[]) AS r(id, event_id)`,
        [sub.id, rows.map((row) => row.id), rows.map((row) => row.event_id)],
      );
      await tx.raw(
        `INSERT INTO pg_temp.deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
         SELECT 'dlv_backlog_' || e.id, e.id, ?::text, 'pending', 1, now() FROM unnest(?::text[]) AS e(id)`,
        [down.id, eventIds],
      );
      const batch = rows;
      const outcome = { startedAt: new Date(), durationMs: 3, statusCode: 200, error: null, responseBytes: null, ok: true };

      const plans = {
        claim: await planOf(tx as unknown as Db, () => claimAttempts(tx as unknown as Db, batch.map((row) => ({ deliveryId: row.id, attempt: 1 })), 30_000)),
        record: await planOf(tx as unknown as Db, () =>
          recordAttempts(tx as unknown as Db, batch.map((row) => ({ attempt: { deliveryId: row.id, subscriptionId: sub.id, attempt: 1 }, outcome })), [1_000]),
        ),
        fanOut: await planOf(tx as unknown as Db, () => fanOutCollecting(tx as unknown as Db, eventIds.slice(0, 20))),
      };

      for (const text of Object.values(plans)) {
        expect(text).not.toMatch(/deliveries_due_idx|deliveries_one_pending_idx|Seq Scan on deliveries/);
        expect(text).toMatch(/on deliveries/);
      }
      expect(plans.claim).toMatch(/Index Scan using deliveries_pkey on deliveries d_1/);
      expect(plans.claim).toMatch(/Index Scan using deliveries_pkey on deliveries d_2/);
      expect(plans.record).toMatch(/Index Scan using deliveries_pkey on deliveries d\b/);
      expect(plans.fanOut).toMatch(/Index Scan using deliveries_first_delivery_idx on deliveries d\b/);
    } finally {
      await tx.rollback();
    }
  });
});

describe('a claim batch of a subscription whose history grew after the statistics were taken', () => {
  it('reads its attempts by key, not the history (custom plan, as the dispatcher runs it)', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/ok/backlog-plans-history');
    const tx = (await h.db.transaction()) as unknown as Db & { rollback(): Promise<void> };
    try {
      // Statistics of a young service: 500 subscriptions with 2 deliveries each.
      await shadowTables(tx);
      await tx.raw('INSERT INTO pg_temp.webhook_subscriptions SELECT * FROM public.webhook_subscriptions WHERE id = ?', [sub.id]);
      await tx.raw(
        `INSERT INTO pg_temp.deliveries (id, event_id, subscription_id, status, attempt_count, finished_at)
         SELECT 'dlv_young_' || g, 'evt_young_' || g, 'wh_young_' || (g % 500), 'delivered', 1, now() FROM generate_series(1, 1000) g`,
      );
      await tx.raw('ANALYZE pg_temp.deliveries, pg_temp.events, pg_temp.webhook_subscriptions');
      // Then this subscription delivers 5,000 events, and 20 more are due.
      await tx.raw(
        `INSERT INTO pg_temp.deliveries (id, event_id, subscription_id, status, attempt_count, finished_at)
         SELECT 'dlv_hist_' || g, 'evt_hist_' || g, ?::text, 'delivered', 1, now() FROM generate_series(1, 5000) g`,
        [sub.id],
      );
      const due = Array.from({ length: 20 }, () => ({ id: newId('dlv'), eventId: newId('evt') }));
      await tx.raw(
        `INSERT INTO pg_temp.events (id, account_id, type, body, fanned_out_at)
         SELECT e, ?::text, 'scan.completed', '{}', now() FROM unnest(?::text[]) AS e`,
        [tenant.accountId, due.map((d) => d.eventId)],
      );
      await tx.raw(
        `INSERT INTO pg_temp.deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
         SELECT r.id, r.event_id, ?::text, 'pending', 0, now() - interval '1 second' FROM unnest(?::text[], ?::text[]) AS r(id, event_id)`,
        [sub.id, due.map((d) => d.id), due.map((d) => d.eventId)],
      );

      const plan = await planOf(tx, () => claimAttempts(tx, due.map((d) => ({ deliveryId: d.id, attempt: 1 })), 30_000), 'custom');

      expect(plan).toMatch(/Index Scan using deliveries_pkey on deliveries d_1/);
      expect(plan).not.toMatch(/deliveries_subscription_(status_)?log_idx/);
      // And the claim itself still claims all 20.
      const claimed = await claimAttempts(tx, due.map((d) => ({ deliveryId: d.id, attempt: 1 })), 30_000);
      expect(claimed.filter((c) => c.claimed)).toHaveLength(20);
    } finally {
      await tx.rollback();
    }
  });
});

describe(`the sweep beside ${BACKLOG} pending deliveries, none of them due yet`, () => {
  it('looks up only the due ones in deliveries_due_idx instead of reading every pending one', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/ok/backlog-sweep');
    const tx = await h.db.transaction();
    try {
      await shadowTables(tx as unknown as Db);
      await tx.raw(
        `INSERT INTO pg_temp.deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
         SELECT 'dlv_later_' || g, 'evt_later_' || g, ?::text, 'pending', 1, now() + interval '1 hour' FROM generate_series(1, ?::int) g`,
        [sub.id, BACKLOG],
      );
      await tx.raw('ANALYZE pg_temp.deliveries');
      const plan = await planOf(tx as unknown as Db, () => findOverdueDeliveries(tx as unknown as Db, 30_000, 500), 'custom');
      expect(plan).toMatch(/Index Scan using deliveries_due_idx on deliveries/);
      // The bound on next_attempt_at is the index's condition, not a filter on every pending row.
      expect(plan).toMatch(/Index Cond: \(next_attempt_at <= /);
    } finally {
      await tx.rollback();
    }
  });
});
