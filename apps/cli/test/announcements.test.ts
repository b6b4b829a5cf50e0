import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createSubscription, PRODUCER_FAN_OUT_MAX } from '@svc/core';
import { waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from '@svc/dispatcher/test-support';
import { deliveredRow, openDeliveryStage, PROMPT_DELIVERY_MS, runSvcJson, testEnv } from './support.js';

/**
 * `svc` hands a committed event to the dispatchers with a Postgres NOTIFY instead of BullMQ jobs
 * (docs/adr/0015). These stories follow that announcement to the receiver: heard by a running
 * dispatcher, not heard at all, and heard again after the listening connection was cut.
 */

/** The sweep's threshold: a first attempt due this long ago without one made is presumed lost. */
const SWEEP_OVERDUE_MS = 2_000;

let stage: { harness: Harness; env: Record<string, string> };

beforeAll(async () => {
  stage = await openDeliveryStage();
});

afterAll(async () => {
  await stage.harness.close();
});

/** The Postgres backends LISTENing for announcements on the harness's database. */
async function listeningBackends(h: Harness): Promise<number[]> {
  const result = await h.db.raw<{ rows: Array<{ pid: number }> }>(
    // By the connection's name: its `query` column shows the last statement, LISTEN or a check's SELECT 1.
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'svc dispatcher jobs announcements'",
  );
  return result.rows.map((row) => row.pid);
}

describe('an event svc announces', () => {
  it('of an account with more subscriptions than its producer fans out, is fanned out from its announced fan-out job and received by every subscription', async () => {
    const h = stage.harness;
    const { accountId, site } = await seedTenant(h);
    const subscriptionIds: string[] = [];
    for (let i = 0; i <= PRODUCER_FAN_OUT_MAX; i++) {
      subscriptionIds.push((await createSubscription(h.db, accountId, { url: h.receiver.url(`/ok?wide=${i}`), events: ['power_up.deployed'] })).id);
    }

    const out = await runSvcJson<{ eventId: string }>(['power-ups', 'deploy', '--site', site.id, '--power-up', 'pu_wide'], stage.env);

    const delivered = await waitFor(
      async () => {
        const rows = await h.db('deliveries').where({ event_id: out.eventId, status: 'delivered' }).select('subscription_id');
        return rows.length === subscriptionIds.length && rows;
      },
      20_000,
      'every subscription to be delivered',
    );
    expect(delivered.map((row: { subscription_id: string }) => row.subscription_id).sort()).toEqual([...subscriptionIds].sort());
    const event = await h.db('events').where({ id: out.eventId }).first('created_at', 'fanned_out_at');
    // Not by its producer (the account is too wide) and not by a sweep (none ran): by the announced job.
    expect(event.fanned_out_at.getTime()).toBeGreaterThan(event.created_at.getTime());
    // Each subscription received its delivery, never more often than attempts were recorded for it:
    // once, unless a loaded machine made an attempt time out (recorded) and retried it.
    const attempts = await h.db('deliveries').where({ event_id: out.eventId }).select('id', 'attempt_count');
    const received = new Map<string, number>();
    for (const request of h.receiver.requests.filter((r) => r.path.startsWith('/ok?wide='))) {
      const id = String(request.headers['x-service-delivery-id']);
      received.set(id, (received.get(id) ?? 0) + 1);
    }
    const outOfBounds = attempts.filter((row: { id: string; attempt_count: number }) => {
      const requests = received.get(row.id) ?? 0;
      return requests < 1 || requests > row.attempt_count;
    });
    expect(outOfBounds).toEqual([]);
    expect(new Set(received.keys())).toEqual(new Set(attempts.map((row: { id: string }) => row.id)));
    expect(attempts).toHaveLength(subscriptionIds.length);
  });

  it('with no dispatcher listening, is still delivered: the sweep of a dispatcher started later queues its overdue first attempt', async () => {
    const h = await createHarness({ DISPATCHER_SWEEP_INTERVAL_MS: '250' });
    try {
      const { site, subscribe } = await seedTenant(h);
      const subscription = await subscribe('/ok');
      const env = testEnv({ DATABASE_URL: h.config.databaseUrl, QUEUE_PREFIX: h.config.queuePrefix });

      const out = await runSvcJson<{ eventId: string }>(['power-ups', 'deploy', '--site', site.id, '--power-up', 'pu_unheard'], env);
      h.startDispatcher();

      const delivery = await deliveredRow(h, out.eventId, subscription.id);
      expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 1 });
      const event = await h.db('events').where({ id: out.eventId }).first('created_at');
      const received = h.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === delivery.id);
      expect(received).toHaveLength(1);
      // The announcement went unheard: the sweep queued the attempt once it was overdue.
      expect(received[0]!.receivedAt - (event.created_at as Date).getTime()).toBeGreaterThanOrEqual(SWEEP_OVERDUE_MS);
    } finally {
      await h.close();
    }
  });

  it('after the dispatcher lost its listening connection, is heard again once it has reconnected, and delivered at once', async () => {
    const h = stage.harness;
    const listening = await waitFor(async () => {
      const pids = await listeningBackends(h);
      return pids.length === 1 && pids[0];
    }, 10_000, 'the dispatcher to listen');
    await h.db.raw('SELECT pg_terminate_backend(?)', [listening]);
    const relistening = await waitFor(async () => {
      const pids = await listeningBackends(h);
      return pids.length === 1 && pids[0] !== listening && pids[0];
    }, 10_000, 'the dispatcher to listen again');
    expect(relistening).not.toBe(listening);
    const { site, subscribe } = await seedTenant(h);
    const subscription = await subscribe('/ok');

    const out = await runSvcJson<{ eventId: string }>(['power-ups', 'deploy', '--site', site.id, '--power-up', 'pu_relisten'], stage.env);

    const delivery = await deliveredRow(h, out.eventId, subscription.id);
    expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 1 });
    const event = await h.db('events').where({ id: out.eventId }).first('created_at');
    const received = h.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === delivery.id);
    expect(received).toHaveLength(1);
    expect(received[0]!.receivedAt - (event.created_at as Date).getTime()).toBeLessThan(PROMPT_DELIVERY_MS);
  });
});
