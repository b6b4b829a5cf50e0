import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, completeScan } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { uniqueTag } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { attemptsOf, producerOf, waitForDelivery } from './support/delivery-probe.js';
import { TestDnsServer } from './support/dns-server.js';

const SILENT_DNS_TIMEOUT_MS = 5_000;

/** Issue 8, instance 4: name servers that never answer delay only their own subscriptions. */
describe('receivers whose names are resolved by a name server that never answers', () => {
  let h: Harness;
  let dns: TestDnsServer;

  beforeAll(async () => {
    dns = await new TestDnsServer({ 'answering.dns.test': '127.0.0.1' }).start();
    h = await createHarness({
      WEBHOOK_DNS_SERVERS: dns.server,
      WEBHOOK_DNS_TIMEOUT_MS: String(SILENT_DNS_TIMEOUT_MS),
      WEBHOOK_DNS_TRIES: '1',
      WEBHOOK_TIMEOUT_MS: '10000',
    });
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
    await dns.close();
  });

  it('do not delay a delivery to a name that resolves, and fail their own attempt as a DNS timeout', async () => {
    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const port = h.receiver.port;
    // More stuck lookups than libuv has threads (4), as many as the dispatcher would start at once.
    const silent = [];
    for (let i = 0; i < 16; i += 1) {
      silent.push(await createSubscription(h.db, tenant.accountId, { url: `https://silent-${i}.dns.test:${port}/ok/silent-${tag}`, events: ['scan.completed'] }));
    }
    const first = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 1 });
    // Wait until the silent lookups are on the wire before the answering subscription exists.
    const asked = Date.now();
    while ([...dns.queries.keys()].filter((name) => name.startsWith('silent-')).length < 16 && Date.now() - asked < 10_000) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const stuck = [...dns.queries.keys()].filter((name) => name.startsWith('silent-')).length;
    const answering = await tenant.subscribe(`/ok/answering-${tag}`, ['ai_check.completed']);
    await h.db('webhook_subscriptions').where({ id: answering.id }).update({ url: `https://answering.dns.test:${port}/ok/answering-${tag}` });

    const started = Date.now();
    const second = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 2 });
    const delivered = await waitForDelivery(h, second.eventId, answering.id, (row) => row.status === 'delivered', 'the answering host to be delivered');
    const tookMs = Date.now() - started;
    const stillPending = await h.db('deliveries').where({ event_id: first.eventId, status: 'pending', attempt_count: 0 }).count<{ count: string }[]>('* as count');

    expect(stuck).toBe(16);
    expect(delivered.attempt_count).toBe(1);
    expect(h.receiver.to(`/ok/answering-${tag}`)).toHaveLength(1);
    // Generous, and still below the silent lookups' own timeout they would otherwise wait behind.
    expect(tookMs).toBeLessThan(SILENT_DNS_TIMEOUT_MS);
    expect(Number(stillPending[0]!.count)).toBeGreaterThan(0);

    const timedOut = await waitForDelivery(h, first.eventId, silent[0]!.id, (row) => row.attempt_count >= 1, 'a silent lookup to time out', 20_000);
    const [attempt] = await attemptsOf(h, timedOut.id);
    expect(attempt).toMatchObject({ n: 1, status_code: null, error: 'dns timeout' });
    expect(h.receiver.to(`/ok/silent-${tag}`)).toEqual([]);
  });

  it('with the SSRF guard on, refuses a name that resolves to loopback before anything is sent', async () => {
    const guarded = h.startDispatcher({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    try {
      const tenant = await seedTenant(h);
      const tag = uniqueTag();
      const sub = await createSubscription(h.db, tenant.accountId, { url: `https://answering.dns.test:${h.receiver.port}/ok/guarded-${tag}`, events: ['*'] });
      // Only the guarded dispatcher may take it: the open one would deliver it.
      await h.dispatchers[0]!.stop();
      const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 4 });

      const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.attempt_count >= 1 && row.locked_until === null, 'attempt 1 to be refused');

      const [attempt] = await attemptsOf(h, delivery.id);
      expect(attempt).toMatchObject({ n: 1, status_code: null, error: 'blocked: target answering.dns.test resolves to non-public address 127.0.0.1' });
      expect(h.receiver.to(`/ok/guarded-${tag}`)).toEqual([]);
    } finally {
      await guarded.stop();
    }
  });
});
