import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@svc/core';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, subscriptionRow, waitForDelivery, type DeliveryRow, type Harness } from '@svc/dispatcher/test-support';
import { apiOn, fireEvent, ISO_8601, tenantWithKey, waitForRow } from './delivery-stories.js';
import { dbNow, seedFailedDeliveries, write } from './self-service-stories.js';
import type { TestApi } from './support.js';

let h: Harness;
let api: TestApi;

beforeAll(async () => {
  // The harness's fast schedule (7 attempts within a second or two), one attempt in flight per
  // subscription: the receiver sees a subscription's deliveries in the order they were queued.
  h = await createHarness();
  h.startDispatcher({ DISPATCHER_PER_SUBSCRIPTION_CONCURRENCY: '1' });
  api = apiOn(h);
});
afterAll(async () => {
  await api.close();
  await h.close();
});

const recoverPath = (subscriptionId: string) => `/api/v1/webhooks/${subscriptionId}/recover`;
const redeliverPath = (subscriptionId: string, deliveryId: string) => `/api/v1/webhooks/${subscriptionId}/deliveries/${deliveryId}/redeliver`;
type Tenant = Awaited<ReturnType<typeof tenantWithKey>>;

/** Fires one event for the tenant and waits until its delivery to the subscription has failed for good (all 7 attempts). */
async function failedForGood(t: Tenant, subscriptionId: string): Promise<DeliveryRow> {
  const eventId = await fireEvent(h, t.site.id);
  return waitForDelivery(h, eventId, subscriptionId, (r) => r.status === 'failed', 'the delivery to exhaust its attempts', 20_000);
}

async function deliveriesOfSubscription(subscriptionId: string): Promise<DeliveryRow[]> {
  return h.db('deliveries').where({ subscription_id: subscriptionId }).orderBy([{ column: 'created_at' }, { column: 'id' }]);
}

/** The receiver's requests to a path that carried one of these delivery ids, in the order they came. */
function receivedFor(path: string, deliveryIds: readonly string[]) {
  return h.receiver.to(path).filter((r) => deliveryIds.includes(String(r.headers['x-service-delivery-id'])));
}

/** Waits until the subscription has `count` redeliveries (redelivery_of set) and none of them is pending. */
async function settledRedeliveries(subscriptionId: string, count: number): Promise<DeliveryRow[]> {
  return waitFor(
    async () => {
      const rows = (await deliveriesOfSubscription(subscriptionId)).filter((row) => row.redelivery_of !== null);
      return rows.length === count && rows.every((row) => row.status !== 'pending') && rows;
    },
    20_000,
    `${count} redeliveries to finish`,
  );
}

describe('POST /api/v1/webhooks/{subscriptionId}/recover', () => {
  it('after an outage, sends every delivery that failed in the window again once, oldest first, as a redelivery of it with the same body bytes, arriving once the receiver is fixed', async () => {
    const t = await tenantWithKey(h);
    const path = `/outage/${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const sub = await t.subscribe(path);
    const since = await dbNow(h.db);
    const failed: DeliveryRow[] = [];
    for (let i = 0; i < 3; i += 1) failed.push(await failedForGood(t, sub.id));
    h.receiver.answerWith(path, 200);
    const sentBefore = Date.now();

    const res = await write(api, t.key).post(recoverPath(sub.id)).send({ since: since.toISOString() });

    expect(res.status).toBe(202);
    expect(res.body).toEqual({ data: { recovery: { count: 3, since: since.toISOString(), until: expect.stringMatching(ISO_8601) } } });
    // until defaults to now: after the last failure.
    expect(Date.parse(res.body.data.recovery.until)).toBeGreaterThan(failed[2]!.finished_at!.getTime());
    expect(Date.parse(res.body.data.recovery.until)).toBeGreaterThanOrEqual(sentBefore - 5);
    const redeliveries = await settledRedeliveries(sub.id, 3);
    expect(redeliveries.map((row) => [row.status, row.attempt_count])).toEqual([
      ['delivered', 1],
      ['delivered', 1],
      ['delivered', 1],
    ]);
    const redeliveryOf = new Map(redeliveries.map((row) => [row.redelivery_of!, row]));
    expect([...redeliveryOf.keys()].sort()).toEqual(failed.map((row) => row.id).sort());
    for (const original of failed) expect(redeliveryOf.get(original.id)!.event_id).toBe(original.event_id);
    // Oldest failure first, each once, with the bytes its original carried.
    const newIds = failed.map((original) => redeliveryOf.get(original.id)!.id);
    const arrived = receivedFor(path, newIds);
    expect(arrived.map((r) => r.headers['x-service-delivery-id'])).toEqual(newIds);
    failed.forEach((original, i) => {
      const [firstOriginalAttempt] = receivedFor(path, [original.id]);
      expect(arrived[i]!.body.equals(firstOriginalAttempt!.body)).toBe(true);
    });
    expect(h.receiver.to(path)).toHaveLength(3 * 7 + 3);
    // The failures stay as they were, in the log beside their redeliveries.
    const originals = await h.db('deliveries').whereIn('id', failed.map((row) => row.id));
    expect(originals.map((row) => [row.status, row.attempt_count])).toEqual(Array(3).fill(['failed', 7]));
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'active', failure_count: 0, last_delivery_at: expect.any(Date) });
  });

  it('gives a recovered delivery 7 attempts of its own: one that fails again is counted in failureCount like any other', async () => {
    const t = await tenantWithKey(h);
    const path = `/still-down/${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const sub = await t.subscribe(path);
    const original = await failedForGood(t, sub.id);

    const res = await write(api, t.key).post(recoverPath(sub.id)).send({ since: new Date(original.finished_at!.getTime() - 1).toISOString() });

    expect(res.status).toBe(202);
    expect(res.body.data.recovery.count).toBe(1);
    const [again] = await settledRedeliveries(sub.id, 1);
    expect(again).toMatchObject({ status: 'failed', attempt_count: 7, redelivery_of: original.id, event_id: original.event_id });
    expect(h.receiver.to(path)).toHaveLength(14);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ failure_count: 2, status: 'active' });
  });

  it('only counts with dryRun: nothing is stored or sent, and a recovery afterwards sends the same deliveries', async () => {
    const t = await tenantWithKey(h);
    const path = `/dry-run/${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const sub = await t.subscribe(path);
    const since = await dbNow(h.db);
    const failed = [await failedForGood(t, sub.id), await failedForGood(t, sub.id)];
    h.receiver.answerWith(path, 200);

    const dry = await write(api, t.key).post(recoverPath(sub.id)).send({ since: since.toISOString(), dryRun: true });

    expect(dry.status).toBe(202);
    expect(dry.body.data.recovery).toMatchObject({ count: 2, since: since.toISOString() });
    expect((await deliveriesOfSubscription(sub.id)).map((row) => row.id)).toEqual(failed.map((row) => row.id));
    // Had the dry run stored anything, it would be pending now and this recovery would skip it.
    const real = await write(api, t.key).post(recoverPath(sub.id)).send({ since: since.toISOString(), dryRun: false });
    expect(real.status).toBe(202);
    expect(real.body.data.recovery.count).toBe(2);
    const redeliveries = await settledRedeliveries(sub.id, 2);
    expect(redeliveries.every((row) => row.status === 'delivered')).toBe(true);
    expect(h.receiver.to(path)).toHaveLength(2 * 7 + 2);
  });

  it('skips an event already redelivered and delivered, or pending again, and sends an event that failed twice once, as a redelivery of its latest failure', async () => {
    const t = await tenantWithKey(h);
    const path = `/mixed/${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const sub = await t.subscribe(path);
    const since = await dbNow(h.db);
    const delivered = await failedForGood(t, sub.id);
    const twice = await failedForGood(t, sub.id);
    const pending = await failedForGood(t, sub.id);
    const once = await failedForGood(t, sub.id);
    // One redelivered and delivered while the receiver was briefly back…
    h.receiver.answerWith(path, 200);
    const fixed = await write(api, t.key).post(redeliverPath(sub.id, delivered.id));
    await waitForRow(h, fixed.body.data.delivery.id, (r) => r.status === 'delivered', 'the redelivery to be delivered');
    h.receiver.answerWith(path, 500);
    // …one redelivered and failed again…
    const retried = await write(api, t.key).post(redeliverPath(sub.id, twice.id));
    const secondFailure = await waitForRow(h, retried.body.data.delivery.id, (r) => r.status === 'failed', 'the redelivery to fail too');
    // …and one whose redelivery is pending, its next attempt an hour away.
    const pendingId = newId('dlv');
    await h.db('deliveries').insert({
      id: pendingId,
      event_id: pending.event_id,
      subscription_id: sub.id,
      status: 'pending',
      attempt_count: 1,
      next_attempt_at: h.db.raw(`clock_timestamp() + interval '1 hour'`),
      redelivery_of: pending.id,
    });
    h.receiver.answerWith(path, 200);
    const rowsBefore = await deliveriesOfSubscription(sub.id);

    const res = await write(api, t.key).post(recoverPath(sub.id)).send({ since: since.toISOString() });

    expect(res.status).toBe(202);
    expect(res.body.data.recovery.count).toBe(2);
    const added = (await deliveriesOfSubscription(sub.id)).filter((row) => !rowsBefore.some((before) => before.id === row.id));
    expect(added.map((row) => [row.event_id, row.redelivery_of]).sort()).toEqual(
      [
        [once.event_id, once.id],
        [twice.event_id, secondFailure.id],
      ].sort(),
    );
    const settled = await waitFor(
      async () => {
        const rows = await h.db('deliveries').whereIn('id', added.map((row) => row.id));
        return rows.every((row) => row.status === 'delivered') && rows;
      },
      20_000,
      'the two recovered deliveries to be delivered',
    );
    expect(settled).toHaveLength(2);
    // Oldest failure first: `once` failed before the second failure of `twice`.
    const newIdOf = (original: string) => added.find((row) => row.redelivery_of === original)!.id;
    expect(receivedFor(path, added.map((row) => row.id)).map((r) => r.headers['x-service-delivery-id'])).toEqual([newIdOf(once.id), newIdOf(secondFailure.id)]);
    expect(await h.db('deliveries').where({ id: pendingId }).first()).toMatchObject({ status: 'pending', attempt_count: 1 });
    expect(await h.db('deliveries').where({ event_id: delivered.event_id, subscription_id: sub.id })).toHaveLength(2);
  });

  it('touches only failures in [since, until) of this subscription: one at since is sent, one at until and one before since are not, nor another subscription’s', async () => {
    const t = await tenantWithKey(h);
    const tag = uniqueTag();
    const path = `/window/${tag}`;
    const otherPath = `/window-other/${tag}`;
    h.receiver.answerWith(path, 500);
    h.receiver.answerWith(otherPath, 500);
    const sub = await t.subscribe(path);
    const other = await t.subscribe(otherPath);
    const before = await failedForGood(t, sub.id);
    const inside = await failedForGood(t, sub.id);
    const atUntil = await failedForGood(t, sub.id);
    // The same events failed at the account's other subscription, inside the window too.
    const otherRows = await waitFor(
      async () => {
        const rows = await deliveriesOfSubscription(other.id);
        return rows.length === 3 && rows.every((row) => row.status === 'failed') && rows;
      },
      20_000,
      'the other subscription’s deliveries to fail',
    );
    h.receiver.answerWith(path, 200);
    h.receiver.answerWith(otherPath, 200);
    const window = { since: inside.finished_at!.toISOString(), until: atUntil.finished_at!.toISOString() };

    const res = await write(api, t.key).post(recoverPath(sub.id)).send(window);

    expect(res.status).toBe(202);
    expect(res.body).toEqual({ data: { recovery: { count: 1, ...window } } });
    const [recovered] = await settledRedeliveries(sub.id, 1);
    expect(recovered).toMatchObject({ redelivery_of: inside.id, event_id: inside.event_id, status: 'delivered' });
    expect((await deliveriesOfSubscription(sub.id)).map((row) => row.id).sort()).toEqual([before.id, inside.id, atUntil.id, recovered!.id].sort());
    expect(await deliveriesOfSubscription(other.id)).toEqual(otherRows);
    expect(h.receiver.to(otherPath)).toHaveLength(21);
    expect(receivedFor(path, [recovered!.id])).toHaveLength(1);
    expect(h.receiver.to(path)).toHaveLength(22);
  });

  describe('refuses a bad window with 400 invalid_body and stores nothing', () => {
    const at = '2026-11-20T00:00:00.000Z';
    it.each([
      ['until equal to since', { since: at, until: at }],
      ['until before since', { since: at, until: '2026-11-19T23:59:59.999Z' }],
      ['no since', { until: at }],
      ['a since without its offset', { since: '2026-11-20T00:00:00' }],
      ['a since that is not a time', { since: 'yesterday' }],
      ['a date alone', { since: '2026-11-20' }],
      ['a numeric since', { since: 1_763_596_800_000 }],
      ['an until that is not a time', { since: at, until: 'now' }],
      ['a dryRun that is not a boolean', { since: at, dryRun: 'yes' }],
    ])('%s', async (_label, body) => {
      const t = await tenantWithKey(h);
      const sub = await t.subscribe('/ok/bad-window');
      await seedFailedDeliveries(h.db, { accountId: t.accountId, subscriptionId: sub.id, count: 2, firstFailedAt: new Date('2026-11-19T12:00:00Z'), stepMs: 1000 });
      const before = await deliveriesOfSubscription(sub.id);

      const res = await write(api, t.key).post(recoverPath(sub.id)).send(body);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_body', message: expect.any(String) } });
      expect(await deliveriesOfSubscription(sub.id)).toEqual(before);
    });

    it('a leap second, which matches RFC 3339 but names no instant: the message is the time’s own rule', async () => {
      const t = await tenantWithKey(h);
      const sub = await t.subscribe('/ok/bad-window-leap');

      const res = await write(api, t.key).post(recoverPath(sub.id)).send({ since: '2026-06-30T23:59:60Z' });

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_body', message: expect.stringMatching(/^since must be/) } });
      expect(await deliveriesOfSubscription(sub.id)).toEqual([]);
    });

    it('an empty body', async () => {
      const t = await tenantWithKey(h);
      const sub = await t.subscribe('/ok/bad-window-empty');

      const res = await write(api, t.key).post(recoverPath(sub.id)).set('Content-Type', 'application/json');

      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
    });
  });

  it('refuses an auto-disabled subscription with 409 subscription_disabled, dry run or not, and stores nothing', async () => {
    const t = await tenantWithKey(h);
    const path = `/disabled/${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const sub = await t.subscribe(path);
    const since = await dbNow(h.db);
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ failure_count: 99 });
    const original = await failedForGood(t, sub.id);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'disabled', failure_count: 100 });
    h.receiver.answerWith(path, 200);

    const res = await write(api, t.key).post(recoverPath(sub.id)).send({ since: since.toISOString() });
    const dry = await write(api, t.key).post(recoverPath(sub.id)).send({ since: since.toISOString(), dryRun: true });

    expect([res.status, dry.status]).toEqual([409, 409]);
    expect(res.body).toEqual({ error: { code: 'subscription_disabled', message: expect.any(String) } });
    expect(dry.body.error.code).toBe('subscription_disabled');
    expect((await deliveriesOfSubscription(sub.id)).map((row) => row.id)).toEqual([original.id]);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'disabled', failure_count: 100 });
    expect(h.receiver.to(path)).toHaveLength(7);
  });

  it('answers 404 for another account’s subscription, exactly as for an unknown id, and stores nothing', async () => {
    const owner = await tenantWithKey(h);
    const stranger = await tenantWithKey(h);
    const sub = await owner.subscribe('/ok/recover-not-yours');
    await seedFailedDeliveries(h.db, { accountId: owner.accountId, subscriptionId: sub.id, count: 3, firstFailedAt: new Date('2026-11-19T12:00:00Z'), stepMs: 1000 });
    const before = await deliveriesOfSubscription(sub.id);
    const body = { since: '2026-11-19T00:00:00Z' };

    const foreign = await write(api, stranger.key).post(recoverPath(sub.id)).send(body);
    const unknown = await write(api, stranger.key).post(recoverPath(newId('wh'))).send(body);

    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual(foreign.body);
    expect(await deliveriesOfSubscription(sub.id)).toEqual(before);
    // The owner's own call finds the three.
    const own = await write(api, owner.key).post(recoverPath(sub.id)).send({ ...body, dryRun: true });
    expect(own.body.data.recovery.count).toBe(3);
  });
});
