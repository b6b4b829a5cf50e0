import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { uniqueTag } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import {
  type AttemptRow,
  attemptsOf,
  dueInMs,
  producerOf,
  subscriptionRow,
  waitForDelivery,
} from './support/delivery-probe.js';

/** Long enough that only attempt 1 happens during a test. */
const LONG_DELAY_MS = 600_000;
const LONG_DELAYS = Array(6).fill(String(LONG_DELAY_MS)).join(',');
const TIMEOUT_MS = 1_000;

/**
 * Publishes one scan.completed to a subscription at `url`, waits for attempt 1 to be recorded and
 * checks the delivery was left waiting for attempt 2 in LONG_DELAY_MS; returns attempt 1's row.
 */
async function failFirstAttempt(h: Harness, url: string): Promise<{ attempt: AttemptRow; deliveryId: string }> {
  const tenant = await seedTenant(h);
  const sub = await createSubscription(h.db, tenant.accountId, { url, events: ['*'] });
  const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 20 });
  const delivery = await waitForDelivery(
    h,
    eventId,
    sub.id,
    (row) => row.attempt_count >= 1 && row.locked_until === null,
    'attempt 1 to be recorded',
  );
  const due = await dueInMs(h, delivery.id);

  expect(delivery).toMatchObject({ status: 'pending', attempt_count: 1, finished_at: null, failure_reason: null });
  expect(due).toBeGreaterThan(LONG_DELAY_MS - 5_000);
  expect(due).toBeLessThanOrEqual(LONG_DELAY_MS);
  expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'active', failure_count: 0, last_delivery_at: null });
  const attempts = await attemptsOf(h, delivery.id);
  expect(attempts).toHaveLength(1);
  expect(attempts[0]!.n).toBe(1);
  return { attempt: attempts[0]!, deliveryId: delivery.id };
}

describe('how a failed first attempt is recorded (spec §3.3, §6.3 rule 2)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: LONG_DELAYS, WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) });
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('records a non-2xx answer as its status code with the response excerpt and schedules attempt 2', async () => {
    const path = `/fail/kinds-${uniqueTag()}`;
    const { attempt, deliveryId } = await failFirstAttempt(h, h.receiver.url(path));

    expect(attempt).toMatchObject({ status_code: 500, error: 'HTTP 500', response_excerpt: 'receiver failure' });
    expect(h.receiver.to(path).map((r) => r.headers['x-service-delivery-id'])).toEqual([deliveryId]);
  });

  it('records a receiver that never answers as a timeout after WEBHOOK_TIMEOUT_MS, with no status code', async () => {
    const path = `/hang/kinds-${uniqueTag()}`;
    const { attempt } = await failFirstAttempt(h, h.receiver.url(path));

    expect(attempt).toMatchObject({ status_code: null, error: 'timeout', response_excerpt: null });
    expect(attempt.duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(attempt.duration_ms).toBeLessThan(TIMEOUT_MS + 1_500);
    expect(h.receiver.to(path)).toHaveLength(1);
  });

  it('records a refused connection as "connection refused"', async () => {
    const { attempt } = await failFirstAttempt(h, 'https://127.0.0.1:1/x');

    expect(attempt).toMatchObject({ status_code: null, error: 'connection refused', response_excerpt: null });
  });

  it('records a connection dropped mid-request as "connection reset"', async () => {
    const path = `/reset/kinds-${uniqueTag()}`;
    const { attempt } = await failFirstAttempt(h, h.receiver.url(path));

    expect(attempt).toMatchObject({ status_code: null, error: 'connection reset', response_excerpt: null });
    expect(h.receiver.to(path)).toHaveLength(1);
  });

  it('does not follow a redirect: records "redirect 302 not followed" and never reaches the redirect target', async () => {
    const path = `/redirect/kinds-${uniqueTag()}`;
    const { attempt } = await failFirstAttempt(h, h.receiver.url(path));

    expect(attempt).toMatchObject({ status_code: 302, error: 'redirect 302 not followed' });
    expect(h.receiver.to(path)).toHaveLength(1);
    expect(h.receiver.requests.filter((r) => r.path === '/ok')).toHaveLength(0);
  });
});

describe('a receiver whose certificate the dispatcher does not trust', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: LONG_DELAYS, WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) });
    h.startDispatcher({}, { trustReceiver: false });
  });
  afterAll(async () => {
    await h.close();
  });

  it('records a "tls error" and sends nothing over the unverified connection', async () => {
    const path = `/ok/untrusted-${uniqueTag()}`;
    const { attempt } = await failFirstAttempt(h, h.receiver.url(path));

    expect(attempt.status_code).toBeNull();
    expect(attempt.error).toMatch(/^tls error/);
    expect(attempt.response_excerpt).toBeNull();
    expect(h.receiver.to(path)).toHaveLength(0);
  });
});
