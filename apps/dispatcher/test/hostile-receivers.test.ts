import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan, RESPONSE_EXCERPT_BYTES } from '@svc/core';
import { listDeliveries } from '@svc/core/operator';
import { uniqueTag } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf, subscriptionRow, waitForDelivery } from './support/delivery-probe.js';
import { HOSTILE_BODIES } from './support/receiver.js';

/** Issue 8, instance 1: a receiver's answer must never make an attempt repeat. */
describe('a receiver answering bytes that are not text (NUL, invalid UTF-8, undeclared gzip)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  async function storedAttempts(deliveryId: string) {
    return h.db('delivery_attempts')
      .where({ delivery_id: deliveryId })
      .orderBy('n')
      .select('n', 'status_code', 'error', 'response_excerpt', 'response_excerpt_bytes');
  }

  it.each(Object.keys(HOSTILE_BODIES))('records a 200 answered with %s bytes as delivered after exactly one request, keeping the exact bytes', async (kind) => {
    const tenant = await seedTenant(h);
    const path = `/answer/200/${kind}/${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ failure_count: 3 });
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 1 });

    const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.status !== 'pending', `the ${kind} answer to be recorded`);

    const expected = HOSTILE_BODIES[kind]!.subarray(0, RESPONSE_EXCERPT_BYTES);
    expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 1, locked_until: null });
    expect(h.receiver.to(path).map((r) => r.headers['x-service-delivery-id'])).toEqual([delivery.id]);
    const [attempt, ...others] = await storedAttempts(delivery.id);
    expect(others).toEqual([]);
    expect(attempt).toMatchObject({ n: 1, status_code: 200, error: null });
    expect(Buffer.compare(attempt.response_excerpt_bytes, expected)).toBe(0);
    expect(attempt.response_excerpt).not.toContain('\u0000');
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'active', failure_count: 0 });

    const [logged] = await listDeliveries(h.db, sub.id);
    expect(logged!.attempts).toEqual([
      expect.objectContaining({
        n: 1,
        statusCode: 200,
        responseExcerpt: expected.toString('utf8').replace(/\u0000/g, '\uFFFD'),
        responseExcerptBase64: expected.toString('base64'),
      }),
    ]);
  });

  it.each(Object.keys(HOSTILE_BODIES))('records a 500 answered with %s bytes once per attempt: 7 requests, 7 attempts, then failed and counted once', async (kind) => {
    const tenant = await seedTenant(h);
    const path = `/answer/500/${kind}/${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 1 });

    const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.status !== 'pending', `the ${kind} delivery to end`, 20_000);

    expect(delivery).toMatchObject({ status: 'failed', attempt_count: 7, failure_reason: 'attempts exhausted' });
    expect(h.receiver.to(path)).toHaveLength(7);
    const attempts = await storedAttempts(delivery.id);
    expect(attempts.map((a) => [a.n, a.status_code, a.error])).toEqual([1, 2, 3, 4, 5, 6, 7].map((n) => [n, 500, 'HTTP 500']));
    const expected = HOSTILE_BODIES[kind]!.subarray(0, RESPONSE_EXCERPT_BYTES);
    expect(attempts.every((a) => Buffer.compare(a.response_excerpt_bytes, expected) === 0)).toBe(true);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'active', failure_count: 1 });
  });
});
