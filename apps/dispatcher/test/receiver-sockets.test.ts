import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf, waitForDelivery } from './support/delivery-probe.js';
import { Receiver } from './support/receiver.js';

/** Issue 8, instance 2: sockets to receivers that never close idle connections are bounded. */
describe('idle keep-alive sockets to receivers', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_IDLE_SOCKET_TIMEOUT_MS: '300' });
    h.receiver.neverCloseIdleConnections();
  });
  afterAll(async () => {
    await h.close();
  });

  it('are closed after WEBHOOK_IDLE_SOCKET_TIMEOUT_MS, while an answer slower than that still arrives on its socket', async () => {
    const dispatcher = h.startDispatcher();
    const tenant = await seedTenant(h);
    const path = `/slow/900/idle-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    const events = [];
    for (let i = 0; i < 5; i += 1) events.push(await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: i }));

    for (const { eventId } of events) {
      await waitForDelivery(h, eventId, sub.id, (row) => row.status !== 'pending', 'a slow answer to be recorded');
    }
    const delivered = await h.db('deliveries').where({ subscription_id: sub.id }).pluck('status');
    const opened = h.receiver.tlsConnections;
    const closed = await waitFor(() => h.receiver.openConnections() === 0 && dispatcher.socketCounts().idle === 0, 5_000, 'idle sockets to close');

    expect(delivered).toEqual(['delivered', 'delivered', 'delivered', 'delivered', 'delivered']);
    expect(opened).toBeGreaterThan(0);
    expect(closed).toBe(true);
    expect(dispatcher.socketCounts()).toEqual({ active: 0, idle: 0 });
    await dispatcher.stop();
  });
});

describe('sockets to receivers on many hosts', () => {
  let h: Harness;
  const others: Receiver[] = [];

  beforeAll(async () => {
    // Idle sockets would stay a minute: only the total bound can close them in time.
    h = await createHarness({ WEBHOOK_IDLE_SOCKET_TIMEOUT_MS: '60000', DISPATCHER_CONCURRENCY: '3', WEBHOOK_MAX_SOCKETS: '3' });
    for (let i = 0; i < 8; i += 1) others.push((await new Receiver(h.certificate).start()).neverCloseIdleConnections());
  });
  afterAll(async () => {
    await Promise.all(others.map((receiver) => receiver.close()));
    await h.close();
  });

  it('never hold more than WEBHOOK_MAX_SOCKETS at once, closing an idle one for a new host without delaying its attempt', async () => {
    const dispatcher = h.startDispatcher();
    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const subs = [];
    for (const receiver of others) {
      subs.push(await createSubscription(h.db, tenant.accountId, { url: receiver.url(`/ok/host-${tag}`), events: ['*'] }));
    }
    let most = 0;
    let mostAtReceivers = 0;
    const sampler = setInterval(() => {
      const { active, idle } = dispatcher.socketCounts();
      most = Math.max(most, active + idle);
      mostAtReceivers = Math.max(mostAtReceivers, others.reduce((sum, receiver) => sum + receiver.openConnections(), 0));
    }, 5);
    const started = Date.now();
    const events = [];
    try {
      for (let i = 0; i < 3; i += 1) events.push(await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: i }));
      for (const { eventId } of events) {
        for (const sub of subs) await waitForDelivery(h, eventId, sub.id, (row) => row.status === 'delivered', `delivery to ${sub.url}`);
      }
    } finally {
      clearInterval(sampler);
    }
    const tookMs = Date.now() - started;
    await dispatcher.stop();

    expect(others.map((receiver) => receiver.to(`/ok/host-${tag}`).length)).toEqual(others.map(() => 3));
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(3);
    // The receivers may see a closed socket's FIN after the next connection: one in transit at most.
    expect(mostAtReceivers).toBeLessThanOrEqual(4);
    // Far below the 60 s an attempt would wait for an idle socket to time out.
    expect(tookMs).toBeLessThan(30_000);
  });
});
