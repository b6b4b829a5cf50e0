import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan, unrecordedAttemptReason } from '@svc/core';
import { uniqueTag } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { attemptsOf, producerOf, subscriptionRow, waitForDelivery } from './support/delivery-probe.js';

/**
 * Issue 8: an outcome Postgres refuses must not leave its attempt to be sent again and again.
 * A trigger in this file's own database refuses records the way the NUL byte once did (SQLSTATE
 * 22021); the path decides whether it refuses only records with response bytes, or every record.
 */
describe('an attempt whose outcome Postgres refuses to record', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_TIMEOUT_MS: '500' });
    await h.db.raw(`
      CREATE FUNCTION refuse_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
                    WHERE d.id = NEW.delivery_id
                      AND (s.url LIKE '%/ok/refuse-all-%' OR (s.url LIKE '%/ok/refuse-bytes-%' AND NEW.response_excerpt_bytes IS NOT NULL))) THEN
          RAISE EXCEPTION 'invalid byte sequence for encoding "UTF8"' USING ERRCODE = '22021';
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_attempt BEFORE INSERT ON delivery_attempts FOR EACH ROW EXECUTE FUNCTION refuse_attempt();`);
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('is recorded again without the response bytes when only they are refused: one request, delivered', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/refuse-bytes-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 1 });

    const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.status !== 'pending', 'the degraded record');

    expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 1, claims: 1 });
    expect(h.receiver.to(path)).toHaveLength(1);
    expect(await attemptsOf(h, delivery.id)).toEqual([expect.objectContaining({ n: 1, status_code: 200, error: null, response_excerpt: null })]);
  });

  it('when every record is refused, is sent at most 3 times, then its delivery fails with a reason and failureCount untouched', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/refuse-all-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 1 });

    // Each claim waits for the lease (timeout 0.5 s + 5 s) to run out: three of them.
    const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.status !== 'pending', 'the claim limit to fail the delivery', 45_000);

    expect(delivery).toMatchObject({ status: 'failed', attempt_count: 0, claims: 3, failure_reason: unrecordedAttemptReason(1) });
    expect(h.receiver.to(path)).toHaveLength(3);
    expect(await attemptsOf(h, delivery.id)).toEqual([]);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'active', failure_count: 0 });
  }, 60_000);
});
