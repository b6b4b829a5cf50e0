import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { completeScan, deployPowerUp } from '@svc/core';
import { PRODUCER_FAN_OUT_MAX } from '@svc/core/dispatcher';
import { fanOutCollecting, uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { attemptsOf, producerOf } from './support/delivery-probe.js';

/** ADR 11: a producer fans its event out in its own statement and queues the first attempts itself. */
describe('a producer fanning its event out in its own transaction', () => {
  let h: Harness;

  beforeEach(async () => {
    h = await createHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  async function deliveriesOf(eventId: string) {
    return h.db('deliveries').where({ event_id: eventId }).orderBy('subscription_id').select('id', 'subscription_id', 'status', 'attempt_count', 'redelivery_of');
  }

  it('commits one pending delivery per matching active subscription with the event, and queues their first attempts and no fan-out job', async () => {
    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const all = await tenant.subscribe(`/ok/all-${tag}`);
    const scans = await tenant.subscribe(`/ok/scans-${tag}`, ['scan.completed']);
    await tenant.subscribe(`/ok/other-${tag}`, ['power_up.deployed']);
    const disabled = await tenant.subscribe(`/ok/disabled-${tag}`);
    await h.db('webhook_subscriptions').where({ id: disabled.id }).update({ status: 'disabled' });

    // No dispatcher runs yet: what is in Postgres and Redis is the producer's own doing.
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 64 });

    const event = await h.db('events').where({ id: eventId }).first('created_at', 'fanned_out_at');
    expect(event.fanned_out_at).toEqual(event.created_at);
    const rows = await deliveriesOf(eventId);
    expect(rows.map((row) => row.subscription_id)).toEqual([all.id, scans.id].sort());
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'pending', attempt_count: 0, redelivery_of: null });
      const job = await h.queues.deliveries[0]!.getJob(`${row.id}-1`);
      expect(job?.data).toEqual({ deliveryId: row.id, subscriptionId: row.subscription_id, attempt: 1 });
      expect(job?.opts.delay ?? 0).toBe(0);
    }
    expect(await h.queues.fanout.getJob(eventId)).toBeUndefined();

    h.startDispatcher();
    await waitFor(async () => (await deliveriesOf(eventId)).every((row) => row.status === 'delivered'), 20_000, 'both deliveries to be delivered');

    expect(h.receiver.to(`/ok/all-${tag}`)).toHaveLength(1);
    expect(h.receiver.to(`/ok/scans-${tag}`)).toHaveLength(1);
    expect(h.receiver.to(`/ok/other-${tag}`)).toHaveLength(0);
    expect(h.receiver.to(`/ok/disabled-${tag}`)).toHaveLength(0);
    const after = await deliveriesOf(eventId);
    expect(after.map((row) => row.id)).toEqual(rows.map((row) => row.id));
    for (const row of after) expect(await attemptsOf(h, row.id)).toHaveLength(1);
  });

  it('makes the fan-out job of an event its producer fanned out add and queue nothing', async () => {
    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const sub = await tenant.subscribe(`/ok/again-${tag}`);
    const { eventId } = await deployPowerUp(producerOf(h), { siteId: tenant.site.id, powerUpId: 'pu-again' });
    const [row] = await deliveriesOf(eventId);
    const before = await h.db('events').where({ id: eventId }).first('fanned_out_at');

    // A subscription made after the event's commit is not the event's audience.
    await tenant.subscribe(`/ok/later-${tag}`);
    const again = await Promise.all([fanOutCollecting(h.db, [eventId]), fanOutCollecting(h.db, [eventId])]);

    // Its first attempt is still waiting (no dispatcher runs): the producer queued it, nothing to do.
    expect(row).toMatchObject({ status: 'pending', attempt_count: 0, subscription_id: sub.id });
    expect(again).toEqual([{ firstAttempts: [] }, { firstAttempts: [] }]);
    expect(await deliveriesOf(eventId)).toEqual([row]);
    expect(await h.db('events').where({ id: eventId }).first('fanned_out_at')).toEqual(before);

    h.startDispatcher();
    await waitFor(async () => (await deliveriesOf(eventId))[0]!.status === 'delivered', 20_000, 'the delivery to be delivered');
    expect(await fanOutCollecting(h.db, [eventId])).toEqual({ firstAttempts: [] });
    expect(h.receiver.to(`/ok/again-${tag}`)).toHaveLength(1);
    expect(h.receiver.to(`/ok/later-${tag}`)).toHaveLength(0);
  });

  it(`leaves an account with more than ${PRODUCER_FAN_OUT_MAX} matching subscriptions to the dispatcher's fan-out, which delivers to each exactly once`, async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/wide-${uniqueTag()}`;
    for (let i = 0; i <= PRODUCER_FAN_OUT_MAX; i += 1) await tenant.subscribe(path, ['power_up.deployed']);

    h.startDispatcher();

    const { eventId } = await deployPowerUp(producerOf(h), { siteId: tenant.site.id, powerUpId: 'pu-wide' });

    await waitFor(
      async () => (await deliveriesOf(eventId)).filter((row) => row.status === 'delivered').length === PRODUCER_FAN_OUT_MAX + 1,
      30_000,
      'every delivery to be delivered',
    );
    const ids = h.receiver.to(path).map((request) => String(request.headers['x-service-delivery-id']));
    // One delivery per subscription, each reached; a request beyond the first is a recorded retry
    // (an attempt that timed out on a loaded machine), never a send without its own attempt row.
    const deliveries = await deliveriesOf(eventId);
    expect(new Set(ids)).toEqual(new Set(deliveries.map((row) => row.id)));
    expect(new Set(deliveries.map((row) => row.subscription_id)).size).toBe(PRODUCER_FAN_OUT_MAX + 1);
    // Per delivery, requests received ≤ attempts recorded (an attempt that timed out before the
    // receiver saw it is recorded without a request).
    const recorded = await h.db('delivery_attempts').whereIn('delivery_id', deliveries.map((row) => row.id)).groupBy('delivery_id').select('delivery_id').count<{ delivery_id: string; count: string }[]>('* as count');
    const attemptsOf = new Map(recorded.map((row) => [row.delivery_id, Number(row.count)]));
    const sentBeyondRecorded = deliveries.filter((row) => ids.filter((id) => id === row.id).length > (attemptsOf.get(row.id) ?? 0));
    expect(sentBeyondRecorded).toEqual([]);
    // Exactly one attempt of each delivery succeeded: any earlier one failed (a timeout on a loaded machine).
    const succeeded = await h.db('delivery_attempts').whereIn('delivery_id', deliveries.map((row) => row.id)).whereBetween('status_code', [200, 299]).groupBy('delivery_id').select('delivery_id').count<{ delivery_id: string; count: string }[]>('* as count');
    expect(succeeded.map((row) => Number(row.count))).toEqual(Array(deliveries.length).fill(1));
    // Fanned out by a later transaction than the producer's: the fan-out job's.
    const event = await h.db('events').where({ id: eventId }).first('created_at', 'fanned_out_at');
    expect(event.fanned_out_at.getTime()).toBeGreaterThan(event.created_at.getTime());
    const created = await h.db('deliveries').where({ event_id: eventId }).min({ at: 'created_at' }).first();
    expect(created!.at.getTime()).toBeGreaterThan(event.created_at.getTime());
  });
});
