import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun } from '@svc/core';
import { createApiKey, createSubscription } from '@svc/core/operator';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from '@svc/dispatcher/test-support';
import { SiteVisibilityClient, SiteVisibilityError, type Delivery } from '../src/index.js';
import { startApi, type ListeningApi } from './support.js';

let h: Harness;
let api: ListeningApi;

beforeAll(async () => {
  h = await createHarness();
  h.startDispatcher();
  api = await startApi({ DATABASE_URL: h.config.databaseUrl, QUEUE_PREFIX: h.config.queuePrefix, RATE_LIMIT_PER_MINUTE: '100000' });
});
afterAll(async () => {
  await api.close();
  await h.close();
});

async function customer() {
  const tenant = await seedTenant(h);
  const { key } = await createApiKey(h.db, tenant.accountId, { name: `key ${uniqueTag()}`, scopes: ['read:webhooks', 'write:webhooks'] });
  return { tenant, client: new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl }) };
}

const fire = (siteId: string) => completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId, compositeScore: 61 });

async function settled(client: SiteVisibilityClient, subscriptionId: string, count: number): Promise<Delivery[]> {
  await waitFor(
    async () => {
      const page = await client.deliveries.listPage(subscriptionId, { limit: 100 });
      return page.items.length === count && page.items.every((d) => d.status !== 'pending');
    },
    20_000,
    `${count} settled deliveries`,
  );
  return (await client.deliveries.listPage(subscriptionId, { limit: 100 })).items;
}

describe('the client library on the delivery log', () => {
  it('walks every page of the log with the iterator, newest first, each delivery once while new ones arrive', async () => {
    const { tenant, client } = await customer();
    const sub = await createSubscription(h.db, tenant.accountId, { url: h.receiver.url(`/ok/${uniqueTag()}`), events: ['*'] });
    for (let i = 0; i < 7; i++) await fire(tenant.site.id);
    const before = await settled(client, sub.id, 7);

    const walked: string[] = [];
    for await (const delivery of client.deliveries.list(sub.id, { limit: 2 })) {
      walked.push(delivery.id);
      if (walked.length === 3) await fire(tenant.site.id); // newer than every page still to come
    }

    expect(walked).toEqual(before.map((d) => d.id));
    expect(new Set(walked).size).toBe(7);
  });

  it('finds a failed delivery, reads its attempts, redelivers it after the receiver is fixed, and the redelivery arrives', async () => {
    const { tenant, client } = await customer();
    const path = `/fixable/${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const sub = await createSubscription(h.db, tenant.accountId, { url: h.receiver.url(path), events: ['ai_check.completed'] });
    await fire(tenant.site.id);
    const [failed] = await settled(client, sub.id, 1);

    const failedOnes: Delivery[] = [];
    for await (const delivery of client.deliveries.list(sub.id, { status: 'failed' })) failedOnes.push(delivery);
    const detail = await client.deliveries.get(sub.id, failed!.id);
    h.receiver.answerWith(path, 200);
    const redelivery = await client.deliveries.redeliver(sub.id, failed!.id);
    await waitFor(async () => (await client.deliveries.get(sub.id, redelivery.id)).status === 'delivered', 20_000, 'the redelivery delivered');

    expect(failedOnes.map((d) => d.id)).toEqual([failed!.id]);
    expect(detail.attempts.map((a) => [a.n, a.statusCode])).toEqual([1, 2, 3, 4, 5, 6, 7].map((n) => [n, 500]));
    expect(detail.payload).toEqual(JSON.parse(h.receiver.to(path)[0]!.body.toString('utf8')));
    expect(redelivery).toMatchObject({ status: 'pending', redeliveryOf: failed!.id, eventId: failed!.eventId });
    const received = h.receiver.to(path);
    expect(received.at(-1)!.headers['x-service-delivery-id']).toBe(redelivery.id);
    expect(received.at(-1)!.body.equals(received[0]!.body)).toBe(true);
  });

  it('recovers the deliveries that failed during an outage: a dry run counts, the recovery sends each event once, and a second finds none', async () => {
    const { tenant, client } = await customer();
    const path = `/outage/${uniqueTag()}`;
    h.receiver.answerWith(path, 503);
    const sub = await client.webhooks.create({ url: h.receiver.url(path), events: ['ai_check.completed'] });
    const since = new Date(Date.now() - 1_000);
    for (let i = 0; i < 3; i++) await fire(tenant.site.id);
    const failed = await settled(client, sub.id, 3);
    const until = new Date(Date.now() + 1_000);
    h.receiver.answerWith(path, 200);

    const dryRun = await client.webhooks.recover(sub.id, { since, until, dryRun: true });
    const afterDryRun = (await client.deliveries.listPage(sub.id)).items;
    const recovery = await client.webhooks.recover(sub.id, { since: since.toISOString(), until });
    const log = await settled(client, sub.id, 6);
    const again = await client.webhooks.recover(sub.id, { since, until });

    expect(failed.map((d) => d.status)).toEqual(['failed', 'failed', 'failed']);
    expect(dryRun).toEqual({ count: 3, since: since.toISOString(), until: until.toISOString() });
    expect(afterDryRun.map((d) => d.id)).toEqual(failed.map((d) => d.id));
    expect(recovery).toEqual({ count: 3, since: since.toISOString(), until: until.toISOString() });
    const redeliveries = log.filter((d) => d.redeliveryOf !== null);
    expect(redeliveries.map((d) => d.status)).toEqual(['delivered', 'delivered', 'delivered']);
    expect(new Set(redeliveries.map((d) => d.redeliveryOf))).toEqual(new Set(failed.map((d) => d.id)));
    expect(new Set(redeliveries.map((d) => d.eventId))).toEqual(new Set(failed.map((d) => d.eventId)));
    expect(h.receiver.to(path).filter((r) => redeliveries.some((d) => d.id === r.headers['x-service-delivery-id']))).toHaveLength(3);
    expect(again).toEqual({ count: 0, since: since.toISOString(), until: until.toISOString() });
  });

  it('reports a redelivery of a delivery still pending as delivery_pending, and stores nothing', async () => {
    const { tenant, client } = await customer();
    const path = `/hang/${uniqueTag()}`;
    const sub = await createSubscription(h.db, tenant.accountId, { url: h.receiver.url(path), events: ['ai_check.completed'] });
    await fire(tenant.site.id);
    // Attempt 1 is on the wire and the receiver never answers: the delivery stays pending.
    await waitFor(() => h.receiver.to(path).length === 1, 15_000, 'attempt 1 on the wire');
    const [pending] = (await client.deliveries.listPage(sub.id)).items;

    const refused = await client.deliveries.redeliver(sub.id, pending!.id).catch((error: unknown) => error);

    expect(refused).toBeInstanceOf(SiteVisibilityError);
    expect(refused).toMatchObject({ code: 'delivery_pending', status: 409 });
    expect((await client.deliveries.listPage(sub.id)).items.map((d) => d.id)).toEqual([pending!.id]);
  });

  it('reports another account’s subscription as not_found and a bad status filter as invalid_query', async () => {
    const { client } = await customer();
    const other = await customer();
    const sub = await createSubscription(h.db, other.tenant.accountId, { url: h.receiver.url('/ok/other'), events: ['*'] });

    const missing = await client.deliveries.listPage(sub.id).catch((error: unknown) => error);
    const bad = await other.client.deliveries.listPage(sub.id, { status: 'lost' as never }).catch((error: unknown) => error);

    expect(missing).toMatchObject({ code: 'not_found', status: 404 });
    expect(bad).toMatchObject({ code: 'invalid_query', status: 400 });
    expect((bad as Error).message).toContain('status');
  });
});
