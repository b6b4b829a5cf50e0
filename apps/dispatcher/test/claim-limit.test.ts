import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Db, completeScan, createLogger, MAX_CLAIMS_PER_ATTEMPT, newId, unrecordedAttemptReason } from '@svc/core';
import { listDeliveries } from '@svc/core/operator';
import { claimAttempts, type ClaimResult, insertEvent, recordAttempts } from '@svc/core/dispatcher';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { attemptsOf, producerOf, sendCanary, subscriptionRow, waitForDelivery } from './support/delivery-probe.js';

/** One attempt claimed alone, as a batch of one. */
async function claimOne(db: Db, deliveryId: string, attempt: number, leaseMs: number): Promise<ClaimResult> {
  const [result] = await claimAttempts(db, [{ deliveryId, attempt }], leaseMs);
  return result as ClaimResult;
}

/** Issue 8: an attempt that never gets an outcome is not sent without end. */
describe('the claim limit: an attempt claimed 3 times without an outcome fails its delivery', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  /** A pending delivery of a fresh event, due now, with no job (as after a lost job). */
  async function pendingDelivery(path: string) {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(path);
    const scan = await tenant.newScan();
    const deliveryId = newId('dlv');
    await h.db.transaction(async (tx) => {
      const event = await insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 1 });
      await tx('events').where({ id: event.id }).update({ fanned_out_at: tx.fn.now(3) });
      await tx('deliveries').insert({ id: deliveryId, event_id: event.id, subscription_id: sub.id, status: 'pending', attempt_count: 0, next_attempt_at: tx.raw('clock_timestamp()') });
    });
    return { sub, deliveryId };
  }

  it('claims an attempt while its lease keeps running out, at most 3 times, then fails the delivery at the 4th claim instead of handing it out', async () => {
    const { sub, deliveryId } = await pendingDelivery(`/ok/claims-${uniqueTag()}`);
    const claims: string[] = [];
    for (let i = 0; i < MAX_CLAIMS_PER_ATTEMPT + 1; i += 1) {
      // A 1 ms lease: as if the dispatcher holding it died before recording anything.
      const claim = await waitFor(
        async () => {
          const result = await claimOne(h.db, deliveryId, 1, 1);
          return (result.claimed || result.refusal.reason !== 'in-flight-elsewhere') && result;
        },
        5_000,
        `claim ${i + 1}`,
      );
      claims.push(claim.claimed ? 'claimed' : claim.refusal.reason);
    }

    expect(claims).toEqual(['claimed', 'claimed', 'claimed', 'claim-limit']);
    const row = await h.db('deliveries').where({ id: deliveryId }).first();
    expect(row).toMatchObject({ status: 'failed', attempt_count: 0, claims: 3, next_attempt_at: null, failure_reason: unrecordedAttemptReason(1) });
    expect(row.failure_reason).toBe('attempt 1 claimed 3 times without a recorded outcome');
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'active', failure_count: 0 });
    const [logged] = await listDeliveries(h.db, sub.id);
    expect(logged).toMatchObject({ id: deliveryId, status: 'failed', failureReason: unrecordedAttemptReason(1), attempts: [] });
    const again = await claimOne(h.db, deliveryId, 1, 1);
    expect(again).toEqual({ claimed: false, refusal: { reason: 'finished' } });
  });

  it('counts claims per attempt: a recorded outcome starts the next attempt at zero claims', async () => {
    const { deliveryId } = await pendingDelivery(`/ok/claims-reset-${uniqueTag()}`);
    for (let i = 0; i < MAX_CLAIMS_PER_ATTEMPT - 1; i += 1) {
      await waitFor(async () => (await claimOne(h.db, deliveryId, 1, 1)).claimed, 5_000, `claim ${i + 1} of attempt 1`);
    }
    const last = await waitFor(async () => {
      const result = await claimOne(h.db, deliveryId, 1, 60_000);
      return result.claimed && result;
    }, 5_000, 'the last claim of attempt 1');
    const recorded = await recordAttempts(
      h.db,
      [{ attempt: last.attempt, outcome: { startedAt: new Date(), durationMs: 3, statusCode: 503, error: 'HTTP 503', responseBytes: Buffer.from('busy'), ok: false } }],
      [0, 0, 0, 0, 0, 0],
    ).then(([result]) => result);

    expect(recorded).toEqual({ kind: 'retry', nextAttempt: 2, delayMs: 0 });
    expect(await h.db('deliveries').where({ id: deliveryId }).first()).toMatchObject({ status: 'pending', attempt_count: 1, claims: 0 });
    const second = await claimOne(h.db, deliveryId, 2, 60_000);
    expect(second.claimed).toBe(true);
    expect(await h.db('deliveries').where({ id: deliveryId }).first()).toMatchObject({ claims: 1 });
  });

  it('a dispatcher meeting a delivery over the limit fails it unsent, logs it, and the operator sees the reason', async () => {
    const path = `/ok/over-limit-${uniqueTag()}`;
    const { sub, deliveryId } = await pendingDelivery(path);
    await h.db('deliveries').where({ id: deliveryId }).update({ claims: MAX_CLAIMS_PER_ATTEMPT, locked_until: h.db.raw(`clock_timestamp() - interval '1 second'`) });
    const logged: Array<Record<string, unknown>> = [];
    const logger = createLogger('error', { silent: true });
    // Our own logger, silent, with its error entries kept for the assertion.
    logger.error = ((message: string, meta: Record<string, unknown> = {}) => {
      logged.push({ level: 'error', message, ...meta });
      return logger;
    }) as typeof logger.error;
    const dispatcher = h.startDispatcher({}, { logger });

    const failed = await waitFor(async () => {
      const row = await h.db('deliveries').where({ id: deliveryId }).first();
      return row.status !== 'pending' && row;
    }, 15_000, 'the sweep to find the delivery and the claim to fail it');
    await sendCanary(h);
    await dispatcher.stop();

    expect(failed).toMatchObject({ status: 'failed', failure_reason: unrecordedAttemptReason(1) });
    expect(h.receiver.to(path)).toEqual([]);
    expect(await attemptsOf(h, deliveryId)).toEqual([]);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ failure_count: 0 });
    expect(logged).toContainEqual(expect.objectContaining({ level: 'error', deliveryId, failureReason: unrecordedAttemptReason(1) }));
  });

  it('a delivered attempt leaves the delivery with its one claim', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/ok/one-claim-${uniqueTag()}`);
    const dispatcher = h.startDispatcher();
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 2 });
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'delivered', 'the delivery');
    await dispatcher.stop();
    expect(await h.db('deliveries').where({ id: row.id }).first()).toMatchObject({ claims: 1, attempt_count: 1 });
  });
});
