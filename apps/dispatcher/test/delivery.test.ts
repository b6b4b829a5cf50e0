import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, completeScan, deployPowerUp, verifySignature } from '@svc/core';
import { listSubscriptionsAsJsonArray } from '@svc/core/operator';
import { waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
  h.startDispatcher();
});
afterAll(async () => {
  await h.close();
});

const producer = () => ({ db: h.db, queues: h.queues });

describe('delivering an event to its subscribers', () => {
  it('POSTs scan.completed with the spec headers, a verifiable signature and the stored bytes', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/ok/headers', ['scan.completed']);
    const scan = await tenant.newScan();

    const { eventId } = await completeScan(producer(), { scanId: scan.id, score: 92.5 });
    const [received] = await waitFor(() => h.receiver.to('/ok/headers').length === 1 && h.receiver.to('/ok/headers'));

    const event = await h.db('events').where({ id: eventId }).first();
    const delivery = await h.db('deliveries').where({ event_id: eventId }).first();
    expect(received!.body.toString('utf8')).toBe(event.body);
    expect(JSON.parse(event.body)).toEqual({
      event: 'scan.completed',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      data: { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 92.5 },
    });
    expect(tenant.site.domain).not.toMatch(/www\.|\/|[A-Z]/);
    expect(received!.headers['content-type']).toBe('application/json');
    expect(received!.headers['user-agent']).toBe('Service-Webhooks/1.0');
    expect(received!.headers['x-service-event']).toBe('scan.completed');
    expect(received!.headers['x-service-delivery-id']).toBe(delivery.id);
    expect(verifySignature(received!.body, received!.headers['x-service-signature'] as string, sub.secret)).toBe(true);
    expect(verifySignature(received!.body, received!.headers['x-service-signature'] as string, 'f'.repeat(64))).toBe(false);

    const settled = await waitFor(async () => {
      const row = await h.db('deliveries').where({ id: delivery.id }).first();
      return row.status === 'delivered' && row;
    });
    expect(settled.attempt_count).toBe(1);
    const attempts = await h.db('delivery_attempts').where({ delivery_id: delivery.id });
    expect(attempts).toEqual([expect.objectContaining({ n: 1, status_code: 200, error: null })]);
    const [listed] = JSON.parse(await listSubscriptionsAsJsonArray(h.db, tenant.accountId)) as Array<{ lastDeliveryAt: string | null; failureCount: number }>;
    expect(listed!.lastDeliveryAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(listed!.failureCount).toBe(0);
  });

  it('sends each event type only to subscriptions whose events include it or *', async () => {
    const tenant = await seedTenant(h);
    const other = await seedTenant(h);
    await tenant.subscribe('/ok/filter-scan', ['scan.completed']);
    await tenant.subscribe('/ok/filter-ai', ['ai_check.completed', 'power_up.deployed']);
    await tenant.subscribe('/ok/filter-star', ['*']);
    await other.subscribe('/ok/filter-other', ['*']);

    await completeScan(producer(), { scanId: (await tenant.newScan()).id, score: 10 });
    await completeAiMonitorRun(producer(), { siteId: tenant.site.id, compositeScore: 55.25 });
    await deployPowerUp(producer(), { siteId: tenant.site.id, powerUpId: 'pu_schema_markup' });
    await waitFor(() => h.receiver.to('/ok/filter-star').length === 3, 10_000, 'three events at the * subscriber');
    await waitFor(() => h.receiver.to('/ok/filter-ai').length === 2, 10_000, 'two events at the ai/power-up subscriber');
    await waitFor(() => h.receiver.to('/ok/filter-scan').length === 1, 10_000, 'one event at the scan subscriber');

    const events = (path: string) => h.receiver.to(path).map((r) => r.headers['x-service-event']).sort();
    expect(events('/ok/filter-scan')).toEqual(['scan.completed']);
    expect(events('/ok/filter-ai')).toEqual(['ai_check.completed', 'power_up.deployed']);
    expect(events('/ok/filter-star')).toEqual(['ai_check.completed', 'power_up.deployed', 'scan.completed']);
    expect(h.receiver.to('/ok/filter-other')).toHaveLength(0);
    const other_deliveries = await h.db('deliveries as d')
      .join('webhook_subscriptions as s', 's.id', 'd.subscription_id')
      .where('s.account_id', other.accountId);
    expect(other_deliveries).toHaveLength(0);
  });

  it('carries exactly the data fields of §6.1 for ai_check.completed and power_up.deployed', async () => {
    const tenant = await seedTenant(h);
    await tenant.subscribe('/ok/payloads', ['ai_check.completed', 'power_up.deployed']);

    const { run } = await completeAiMonitorRun(producer(), { siteId: tenant.site.id, compositeScore: 71 });
    const { deployment } = await deployPowerUp(producer(), { siteId: tenant.site.id, powerUpId: 'pu_faq' });
    await waitFor(() => h.receiver.to('/ok/payloads').length === 2);

    const bodies = h.receiver.to('/ok/payloads').map((r) => JSON.parse(r.body.toString('utf8')));
    const ai = bodies.find((b) => b.event === 'ai_check.completed');
    const pu = bodies.find((b) => b.event === 'power_up.deployed');
    expect(ai.data).toEqual({ runId: run.id, siteId: tenant.site.id, domain: tenant.site.domain, compositeScore: 71 });
    expect(pu.data).toEqual({ deploymentId: deployment.id, siteId: tenant.site.id, powerUpId: 'pu_faq' });
  });

  it('reuses its keep-alive connection for attempts that follow one another', async () => {
    const tenant = await seedTenant(h);
    await tenant.subscribe('/ok/keep-alive', ['ai_check.completed']);
    const before = h.receiver.tlsConnections;

    for (let i = 1; i <= 10; i += 1) {
      await completeAiMonitorRun(producer(), { siteId: tenant.site.id, compositeScore: i });
      await waitFor(() => h.receiver.to('/ok/keep-alive').length === i, 10_000, `delivery ${i}`);
    }

    expect(h.receiver.tlsConnections - before).toBeLessThanOrEqual(1);
  });
});
