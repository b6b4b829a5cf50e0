import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ServerResponse } from 'node:http';
import { completeScan } from '@svc/core';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { attemptsOf, producerOf, subscriptionRow, waitForDelivery } from './support/delivery-probe.js';

/**
 * Issue 8, instance 5: auto-disable must not write `failed` over a delivery whose attempt is on
 * the wire; the receiver's answer to that attempt decides its record.
 */
describe('auto-disable while another delivery of the subscription is on the wire', () => {
  let h: Harness;

  beforeAll(async () => {
    // A long timeout: the held attempt must outlive the other delivery's 7 attempts on a loaded machine.
    h = await createHarness({ WEBHOOK_TIMEOUT_MS: '15000' });
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('records the held attempt’s 200 as delivered, fails the exhausted one, and disables the subscription at 100', async () => {
    const tenant = await seedTenant(h);
    const path = `/mixed-${uniqueTag()}`;
    const held: ServerResponse[] = [];
    // The score in the event decides: 1 is held until released (then 200), anything else gets 500.
    h.receiver.handle(path, (_req, res, body) => {
      if ((JSON.parse(body.toString('utf8')) as { data: { score: number } }).data.score === 1) held.push(res);
      else res.writeHead(500).end('no');
    });
    const sub = await tenant.subscribe(path);
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ failure_count: 99 });

    const inFlight = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 1 });
    await waitFor(() => held.length === 1, 10_000, 'the first delivery’s attempt to reach the receiver');
    const exhausting = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 2 });
    const exhausted = await waitForDelivery(h, exhausting.eventId, sub.id, (row) => row.status !== 'pending', 'the second delivery to exhaust its attempts');
    const whileHeld = await waitForDelivery(h, inFlight.eventId, sub.id, () => true, 'the held delivery');
    held[0]!.writeHead(200).end('got it');
    const answered = await waitForDelivery(h, inFlight.eventId, sub.id, (row) => row.status !== 'pending', 'the held attempt to be recorded');

    expect(exhausted).toMatchObject({ status: 'failed', attempt_count: 7, failure_reason: 'attempts exhausted' });
    expect(whileHeld).toMatchObject({ status: 'pending', attempt_count: 0 });
    expect(answered).toMatchObject({ status: 'delivered', attempt_count: 1, failure_reason: null, locked_until: null });
    const [attempt, ...more] = await attemptsOf(h, answered.id);
    expect(more).toEqual([]);
    expect(attempt).toMatchObject({ n: 1, status_code: 200, error: null, response_excerpt: 'got it' });
    expect(h.receiver.requests.filter((r) => r.headers['x-service-delivery-id'] === answered.id)).toHaveLength(1);
    // Disabled stays disabled with the count that disabled it: a late success does not re-arm it.
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'disabled', failure_count: 100 });
  });
});
