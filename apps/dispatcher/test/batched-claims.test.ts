import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@svc/core';
import { claimAttempts, insertEvent, recordAttempts } from '@svc/core/dispatcher';
import { uniqueTag } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

/** Issue 13: a batch gives every attempt exactly the answer it would get alone. */
describe('claims and records of several attempts in one statement', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  /** A pending delivery with no job, in the given state. */
  async function delivery(tenant: Awaited<ReturnType<typeof seedTenant>>, subscriptionId: string, fields: Record<string, unknown> = {}) {
    const id = newId('dlv');
    await h.db.transaction(async (tx) => {
      const event = await insertEvent(tx, tenant.accountId, 'power_up.deployed', { deploymentId: newId('dep'), siteId: tenant.site.id, powerUpId: 'pu' });
      await tx('events').where({ id: event.id }).update({ fanned_out_at: tx.fn.now(3) });
      await tx('deliveries').insert({ id, event_id: event.id, subscription_id: subscriptionId, status: 'pending', attempt_count: 0, next_attempt_at: tx.raw('clock_timestamp()'), ...fields });
    });
    return id;
  }

  it('claims the due ones and refuses each other one for its own reason, in one batch across subscriptions', async () => {
    const tenant = await seedTenant(h);
    const active = await tenant.subscribe(`/ok/batch-${uniqueTag()}`);
    const disabled = await tenant.subscribe(`/ok/batch-disabled-${uniqueTag()}`);
    await h.db('webhook_subscriptions').where({ id: disabled.id }).update({ status: 'disabled' });
    const due = await delivery(tenant, active.id);
    const later = await delivery(tenant, active.id, { next_attempt_at: h.db.raw(`clock_timestamp() + interval '1 hour'`) });
    const leased = await delivery(tenant, active.id, { locked_until: h.db.raw(`clock_timestamp() + interval '1 hour'`) });
    const finished = await delivery(tenant, active.id, { status: 'delivered', attempt_count: 1, next_attempt_at: null });
    const ofDisabled = await delivery(tenant, disabled.id);

    const results = await claimAttempts(
      h.db,
      [due, later, leased, finished, ofDisabled, 'dlv_missing'].map((deliveryId) => ({ deliveryId, attempt: 1 })),
      60_000,
    );

    expect(results[0]).toMatchObject({ claimed: true, attempt: { deliveryId: due, subscriptionId: active.id, url: active.url, storedSecret: active.secret, attempt: 1 } });
    expect(results.slice(1).map((r) => (r.claimed ? 'claimed' : r.refusal.reason))).toEqual([
      'not-due',
      'in-flight-elsewhere',
      'finished',
      'subscription-disabled',
      'gone',
    ]);
    const rows = await h.db('deliveries').whereIn('id', [due, later, leased, ofDisabled]).select('id', 'claims', 'locked_until');
    const byId = new Map(rows.map((row) => [row.id as string, row]));
    expect(byId.get(due)!.claims).toBe(1);
    expect(byId.get(due)!.locked_until).not.toBeNull();
    expect([later, leased, ofDisabled].map((id) => byId.get(id)!.claims)).toEqual([0, 0, 0]);
  });

  it('records a delivered and a to-be-retried outcome in one batch, and calls a stale one stale', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/ok/batch-record-${uniqueTag()}`);
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ failure_count: 7 });
    const [ok, failing, stale] = [await delivery(tenant, sub.id), await delivery(tenant, sub.id), await delivery(tenant, sub.id)];
    await claimAttempts(h.db, [ok, failing].map((deliveryId) => ({ deliveryId, attempt: 1 })), 60_000);
    const outcome = (statusCode: number) => ({
      startedAt: new Date(),
      durationMs: 5,
      statusCode,
      error: statusCode < 300 ? null : `HTTP ${statusCode}`,
      responseBytes: Buffer.from('ok'),
      ok: statusCode < 300,
    });

    const results = await recordAttempts(
      h.db,
      [
        { attempt: { deliveryId: ok, subscriptionId: sub.id, attempt: 1 }, outcome: outcome(200) },
        { attempt: { deliveryId: failing, subscriptionId: sub.id, attempt: 1 }, outcome: outcome(503) },
        { attempt: { deliveryId: stale, subscriptionId: sub.id, attempt: 2 }, outcome: outcome(200) },
      ],
      [60_000, 60_000, 60_000, 60_000, 60_000, 60_000],
    );

    expect(results).toEqual([{ kind: 'delivered' }, { kind: 'retry', nextAttempt: 2, delayMs: 60_000 }, { kind: 'stale' }]);
    const rows = await h.db('deliveries').whereIn('id', [ok, failing, stale]).orderBy('id').select('id', 'status', 'attempt_count', 'locked_until', 'claims');
    const byId = new Map(rows.map((row) => [row.id as string, row]));
    expect(byId.get(ok)).toMatchObject({ status: 'delivered', attempt_count: 1, locked_until: null });
    expect(byId.get(failing)).toMatchObject({ status: 'pending', attempt_count: 1, locked_until: null, claims: 0 });
    expect(byId.get(stale)).toMatchObject({ status: 'pending', attempt_count: 0 });
    const attempts = await h.db('delivery_attempts').whereIn('delivery_id', [ok, failing, stale]).select('delivery_id', 'n', 'status_code');
    expect(attempts.sort((a, b) => String(a.delivery_id).localeCompare(String(b.delivery_id)))).toEqual(
      [
        { delivery_id: ok, n: 1, status_code: 200 },
        { delivery_id: failing, n: 1, status_code: 503 },
        // As recordAttempt always did: an attempt that was made keeps its row, even when stale.
        { delivery_id: stale, n: 2, status_code: 200 },
      ].sort((a, b) => a.delivery_id.localeCompare(b.delivery_id)),
    );
    expect(await h.db('webhook_subscriptions').where({ id: sub.id }).first('failure_count')).toEqual({ failure_count: 0 });
  });

  it('fails at once, unsent, a delivery whose attempt (even its 7th) failed after its subscription was auto-disabled, and keeps failureCount at 100', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/ok/disabled-on-the-wire-${uniqueTag()}`);
    const early = await delivery(tenant, sub.id);
    const last = await delivery(tenant, sub.id, { attempt_count: 6 });
    await claimAttempts(h.db, [{ deliveryId: early, attempt: 1 }, { deliveryId: last, attempt: 7 }], 60_000);
    // The subscription reaches 100 through other deliveries while both attempts are on the wire.
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ status: 'disabled', failure_count: 100 });
    const failed = { startedAt: new Date(), durationMs: 5, statusCode: 500, error: 'HTTP 500', responseBytes: Buffer.from('no'), ok: false };

    const [retried] = await recordAttempts(h.db, [{ attempt: { deliveryId: early, subscriptionId: sub.id, attempt: 1 }, outcome: failed }], [60_000, 1, 1, 1, 1, 1]);
    const [exhausted] = await recordAttempts(h.db, [{ attempt: { deliveryId: last, subscriptionId: sub.id, attempt: 7 }, outcome: failed }], [1, 1, 1, 1, 1, 1]);

    expect(retried).toEqual({ kind: 'failed', disabledSubscription: false, cancelled: [] });
    expect(exhausted).toMatchObject({ kind: 'failed', disabledSubscription: false });
    const rows = await h.db('deliveries').whereIn('id', [early, last]).select('id', 'status', 'attempt_count', 'next_attempt_at', 'failure_reason');
    const byId = new Map(rows.map((row) => [row.id as string, row]));
    expect(byId.get(early)).toMatchObject({ status: 'failed', attempt_count: 1, next_attempt_at: null, failure_reason: 'subscription disabled' });
    expect(byId.get(last)).toMatchObject({ status: 'failed', attempt_count: 7, failure_reason: 'subscription disabled' });
    expect(await h.db('webhook_subscriptions').where({ id: sub.id }).first('status', 'failure_count')).toEqual({ status: 'disabled', failure_count: 100 });
  });
});
