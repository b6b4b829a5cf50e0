import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId, type Db } from '@svc/core';
import { insertEvent, oldestDueDeliveryAgeSeconds } from '@svc/core/dispatcher';
import { scrapeSample, uniqueTag, waitFor } from '@svc/core/testing';
import { waitForDelivery } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

const OVERDUE_S = 90;

describe('the age of the oldest due delivery (svc_dispatcher_oldest_due_delivery_age_seconds)', () => {
  let h: Harness;
  let dispatcher: ReturnType<Harness['startDispatcher']>;

  beforeAll(async () => {
    h = await createHarness();
    dispatcher = h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  const age = async () => scrapeSample(await dispatcher.metrics.registry.metrics(), 'svc_dispatcher_oldest_due_delivery_age_seconds');

  it('rises while a due delivery cannot be claimed (a revocation holds its subscription) and falls back to 0 once it is delivered', async () => {
    await waitFor(async () => (await age()) === 0, 10_000, 'the gauge at 0 with nothing due');
    const tenant = await seedTenant(h);
    const path = `/ok/oldest-due-${uniqueTag()}`;
    const sub = await tenant.subscribe(path, ['scan.completed']);
    const scan = await tenant.newScan();
    // Pending, not yet due, no job: nothing takes it until it falls due.
    const deliveryId = newId('dlv');
    const eventId = await h.db.transaction(async (tx) => {
      const event = await insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 3 });
      await tx('events').where({ id: event.id }).update({ fanned_out_at: tx.fn.now(3) });
      await tx('deliveries').insert({ id: deliveryId, event_id: event.id, subscription_id: sub.id, next_attempt_at: tx.raw(`clock_timestamp() + interval '1 hour'`) });
      return event.id;
    });

    // A revocation in progress holds the subscription's row FOR UPDATE: every claim of its attempts is put back as busy.
    const revocation = await h.db.transaction();
    let risen: number;
    try {
      await revocation.raw('SELECT id FROM webhook_subscriptions WHERE id = ? FOR UPDATE', [sub.id]);
      await h.db('deliveries').where({ id: deliveryId }).update({ next_attempt_at: h.db.raw(`clock_timestamp() - make_interval(secs => ?)`, [OVERDUE_S]) });

      risen = await waitFor(async () => {
        const value = await age();
        return value !== undefined && value >= OVERDUE_S + 1 && value;
      }, 15_000, 'the gauge to show the due delivery, and to keep rising');
      expect(await h.db('deliveries').where({ id: deliveryId }).first('status', 'attempt_count')).toEqual({ status: 'pending', attempt_count: 0 });
      expect(h.receiver.to(path)).toHaveLength(0);
    } finally {
      await revocation.rollback();
    }
    expect(risen).toBeLessThan(OVERDUE_S + 30);

    await waitForDelivery(h, eventId, sub.id, (row) => row.status === 'delivered', 'the delivery once the revocation rolled back');
    await waitFor(async () => (await age()) === 0, 10_000, 'the gauge back at 0');
    expect(h.receiver.to(path)).toHaveLength(1);
  });

  it('does not count an attempt on the wire, nor a delivery not yet due', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/ok/not-due-${uniqueTag()}`, ['scan.completed']);
    const scan = await tenant.newScan();
    // Uncommitted: the dispatcher never sees these rows; the query in the same transaction does.
    const tx = await h.db.transaction();
    try {
      const event = await insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 4 });
      await tx('deliveries').insert([
        { id: newId('dlv'), event_id: event.id, subscription_id: sub.id, next_attempt_at: tx.raw(`clock_timestamp() + interval '1 minute'`) },
      ]);
      // Another event's delivery, due 10 minutes ago but leased to a dispatcher right now.
      const inFlight = await insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 5 });
      await tx('deliveries').insert({
        id: newId('dlv'),
        event_id: inFlight.id,
        subscription_id: sub.id,
        next_attempt_at: tx.raw(`clock_timestamp() - interval '10 minutes'`),
        locked_until: tx.raw(`clock_timestamp() + interval '1 minute'`),
      });

      expect(await oldestDueDeliveryAgeSeconds(tx as unknown as Db)).toBe(0);
    } finally {
      await tx.rollback();
    }
  });
});

describe('the oldest-due query beside a large backlog', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  /** EXPLAIN ANALYZE of the statement oldestDueDeliveryAgeSeconds sends, inside `tx`. */
  async function analyzed(tx: Db): Promise<{ plan: string; age: number }> {
    const sent: string[] = [];
    const listener = (query: { sql: string }) => sent.push(query.sql);
    h.db.on('query', listener);
    let age: number;
    try {
      age = await oldestDueDeliveryAgeSeconds(tx);
    } finally {
      h.db.off('query', listener);
    }
    const result = await tx.raw(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${sent.at(-1)!}`);
    return { plan: (result.rows as Array<{ 'QUERY PLAN': string }>).map((row) => row['QUERY PLAN']).join('\n'), age };
  }

  it('reads one entry of deliveries_due_idx past the attempts in flight, never the pending deliveries not yet due', async () => {
    const tx = (await h.db.transaction()) as unknown as Db & { rollback(): Promise<void> };
    try {
      // A private copy of deliveries, same indexes, so the statistics are this test's whatever other tests do.
      await tx.raw('SET LOCAL search_path = pg_temp, public');
      await tx.raw('CREATE TEMP TABLE deliveries (LIKE public.deliveries INCLUDING DEFAULTS INCLUDING CONSTRAINTS) ON COMMIT DROP');
      const indexes = await tx.raw(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'deliveries'`);
      for (const { indexdef } of indexes.rows as Array<{ indexdef: string }>) await tx.raw(indexdef.replace(' ON public.deliveries ', ' ON pg_temp.deliveries '));
      // 20,000 retries scheduled for later, 50 attempts on the wire, and history.
      await tx.raw(
        `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
         SELECT 'dlv_later_' || g, 'evt_later_' || g, 'wh_x', 'pending', 1, now() + make_interval(mins => g) FROM generate_series(1, 20000) g`,
      );
      await tx.raw(
        `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at, locked_until)
         SELECT 'dlv_wire_' || g, 'evt_wire_' || g, 'wh_x', 'pending', 0, now() - make_interval(secs => 600 + g), now() + interval '1 minute' FROM generate_series(1, 50) g`,
      );
      await tx.raw(
        `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, finished_at)
         SELECT 'dlv_done_' || g, 'evt_done_' || g, 'wh_x', 'delivered', 1, now() FROM generate_series(1, 20000) g`,
      );
      await tx.raw('ANALYZE deliveries');

      const idle = await analyzed(tx);
      expect(idle.age).toBe(0);
      expect(idle.plan).toMatch(/Index Scan using deliveries_due_idx on deliveries/);
      expect(idle.plan).toMatch(/Index Cond: \(next_attempt_at <= statement_timestamp\(\)\)/);
      expect(idle.plan).not.toMatch(/Seq Scan|Sort/);
      // Only the attempts on the wire are read and skipped, not the 20,000 due later.
      expect(Number(/Rows Removed by Filter: (\d+)/.exec(idle.plan)?.[1] ?? 0)).toBeLessThanOrEqual(50);

      await tx.raw(
        `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at) VALUES ('dlv_due', 'evt_due', 'wh_x', 'pending', 2, now() - interval '5 minutes')`,
      );
      const late = await analyzed(tx);
      expect(late.age).toBeGreaterThanOrEqual(300);
      expect(late.age).toBeLessThan(400);
      expect(late.plan).toMatch(/Index Scan using deliveries_due_idx on deliveries/);
      expect(late.plan).not.toMatch(/Seq Scan|Sort/);
    } finally {
      await tx.rollback();
    }
  });
});
