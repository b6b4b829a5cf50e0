import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { failDeliveryOfDisabledSubscription } from '@svc/core/dispatcher';
import { waitFor } from '@svc/core/testing';
import { createHarness, HOSTILE_BODIES, waitForDelivery, type Harness } from '@svc/dispatcher/test-support';
import { apiOn, call, deliveriesOf, fireEvent, ISO_8601, tenantWithKey, waitForRow } from './delivery-stories.js';
import type { TestApi } from './support.js';

/** Attempts 2 and 3 follow at once; attempt 4 is an hour away, so a failing delivery stays pending. */
const PENDING_AFTER_THREE = '40,40,3600000,3600000,3600000,3600000';
const HOUR_MS = 3_600_000;

let h: Harness;
let api: TestApi;

beforeAll(async () => {
  h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: PENDING_AFTER_THREE });
  h.startDispatcher();
  api = apiOn(h);
});
afterAll(async () => {
  await api.close();
  await h.close();
});

const logOf = (subscriptionId: string, query = '') => `/api/v1/webhooks/${subscriptionId}/deliveries${query}`;
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

describe('GET /api/v1/webhooks/{subscriptionId}/deliveries', () => {
  it('shows every attempt in order with its status while retries are still pending', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/fail/log-pending');
    const eventId = await fireEvent(h, t.site.id);
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.attempt_count === 3, 'three failed attempts');

    const res = await call(api, t.key).get(logOf(sub.id));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: {
        nextCursor: null,
        deliveries: [
          {
            id: row.id,
            eventId,
            event: 'ai_check.completed',
            status: 'pending',
            createdAt: row.created_at.toISOString(),
            nextAttemptAt: row.next_attempt_at!.toISOString(),
            redeliveryOf: null,
            attempts: [1, 2, 3].map((n) => ({
              n,
              at: expect.stringMatching(ISO_8601),
              statusCode: 500,
              error: 'HTTP 500',
              durationMs: expect.any(Number),
            })),
          },
        ],
      },
    });
    const [delivery] = res.body.data.deliveries;
    const times = delivery.attempts.map((a: { at: string }) => Date.parse(a.at));
    expect([...times].sort((x, y) => x - y)).toEqual(times);
    expect(Date.parse(delivery.nextAttemptAt) - times[2]).toBeGreaterThan(HOUR_MS - 60_000);
    // The id is the X-Service-Delivery-Id the receiver saw, three times.
    expect(h.receiver.to('/fail/log-pending').map((r) => r.headers['x-service-delivery-id'])).toEqual([row.id, row.id, row.id]);
    expect((await h.db('deliveries').where({ id: row.id }).first()).status).toBe('pending');
  });

  it('pages through 120 deliveries newest first with no gap or repeat, while new ones arrive', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/ok/paging', ['ai_check.completed']);
    for (let i = 0; i < 120; i++) await fireEvent(h, t.site.id);
    await waitFor(
      async () => (await h.db('deliveries').where({ subscription_id: sub.id, status: 'delivered' }).count({ n: '*' }))[0]!.n === '120',
      30_000,
      '120 deliveries delivered',
    );
    // Forty deliveries share one createdAt to the millisecond: the id must break the tie.
    const tied = await h.db('deliveries').where({ subscription_id: sub.id }).orderBy('id').limit(40).pluck('id');
    await h.db('deliveries').whereIn('id', tied).update({ created_at: h.db.raw(`(SELECT min(created_at) FROM deliveries WHERE subscription_id = ?)`, [sub.id]) });
    const expected = await h.db('deliveries')
      .where({ subscription_id: sub.id })
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .pluck('id');

    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await call(api, t.key).get(logOf(sub.id, `?limit=7${cursor ? `&cursor=${cursor}` : ''}`));
      expect(res.status).toBe(200);
      seen.push(...res.body.data.deliveries.map((d: { id: string }) => d.id));
      sizes.push(res.body.data.deliveries.length);
      cursor = res.body.data.nextCursor;
      if (sizes.length === 2) {
        // Newer deliveries arriving mid-way must not shift the pages that follow.
        for (let i = 0; i < 3; i++) await fireEvent(h, t.site.id);
        await waitFor(async () => (await h.db('deliveries').where({ subscription_id: sub.id }).count({ n: '*' }))[0]!.n === '123');
      }
    } while (cursor !== null);

    expect(seen).toEqual(expected);
    expect(new Set(seen).size).toBe(120);
    expect(sizes).toEqual([...Array(17).fill(7), 1]);
    const first = await call(api, t.key).get(logOf(sub.id));
    expect(first.body.data.deliveries).toHaveLength(50);
    expect(first.body.data.nextCursor).toEqual(expect.any(String));
    const max = await call(api, t.key).get(logOf(sub.id, '?limit=100'));
    expect(max.body.data.deliveries).toHaveLength(100);
  });

  it('filters by status, and keeps the filter across pages', async () => {
    const t = await tenantWithKey(h);
    const path = '/ok/status-filter';
    const sub = await t.subscribe(path);
    const delivered1 = await fireEvent(h, t.site.id);
    await waitForDelivery(h, delivered1, sub.id, (r) => r.status === 'delivered', 'first delivered');
    const delivered2 = await fireEvent(h, t.site.id);
    await waitForDelivery(h, delivered2, sub.id, (r) => r.status === 'delivered', 'second delivered');
    h.receiver.answerWith(path, 503);
    const pending = await fireEvent(h, t.site.id);
    const toFail = await fireEvent(h, t.site.id);
    await waitForDelivery(h, pending, sub.id, (r) => r.attempt_count === 3, 'third pending');
    const failing = await waitForDelivery(h, toFail, sub.id, (r) => r.attempt_count === 3, 'fourth pending');
    await failDeliveryOfDisabledSubscription(h.db, failing.id);

    const events = async (query: string) =>
      (await call(api, t.key).get(logOf(sub.id, query))).body.data.deliveries.map((d: { eventId: string }) => d.eventId);
    expect(await events('?status=pending')).toEqual([pending]);
    expect(await events('?status=failed')).toEqual([toFail]);
    expect(await events('?status=delivered')).toEqual([delivered2, delivered1]);
    const page1 = await call(api, t.key).get(logOf(sub.id, '?status=delivered&limit=1'));
    const page2 = await call(api, t.key).get(logOf(sub.id, `?status=delivered&limit=1&cursor=${page1.body.data.nextCursor}`));
    expect(page1.body.data.deliveries.map((d: { eventId: string }) => d.eventId)).toEqual([delivered2]);
    expect(page2.body.data.deliveries.map((d: { eventId: string }) => d.eventId)).toEqual([delivered1]);
    expect(page2.body.data.nextCursor).toBeNull();
    const failed = (await call(api, t.key).get(logOf(sub.id, '?status=failed'))).body.data.deliveries[0];
    expect(failed).toMatchObject({ status: 'failed', nextAttemptAt: null });
  });

  const badQueries: Array<[string, string]> = [
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=-1', 'limit'],
    ['limit=', 'limit'],
    ['limit=007', 'limit'],
    ['limit=1e1', 'limit'],
    ['limit=1&limit=2', 'limit'],
    ['cursor=', 'cursor'],
    ['cursor=***', 'cursor'],
    [`cursor=${b64('not json')}`, 'cursor'],
    [`cursor=${b64('[1,2]')}`, 'cursor'],
    [`cursor=${b64('["2026-11-23T04:00:00.000Z"]')}`, 'cursor'],
    [`cursor=${b64('["2026-02-31T00:00:00.000Z","dlv_1"]')}`, 'cursor'],
    [`cursor=${b64('["2026-11-23T04:00:00.000Z","dlv/1"]')}`, 'cursor'],
    [`cursor=${'A'.repeat(600)}`, 'cursor'],
    ['status=bogus', 'status'],
    ['status=PENDING', 'status'],
    ['status=pending&status=failed', 'status'],
  ];
  it.each(badQueries)('answers ?%s with 400 invalid_query naming %s', async (query, parameter) => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/ok/bad-query');

    const res = await call(api, t.key).get(logOf(sub.id, `?${query}`));

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_query');
    expect(res.body.error.message).toMatch(new RegExp(`^${parameter} `));
  });

  it('ignores unknown query parameters', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/ok/unknown-param');
    const res = await call(api, t.key).get(logOf(sub.id, '?page=2&sort=asc'));
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ deliveries: [], nextCursor: null });
  });
});

describe('GET /api/v1/webhooks/{subscriptionId}/deliveries/{deliveryId}', () => {
  it('gives the payload exactly as the receiver got it and each attempt’s response excerpt', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/ok/detail');
    const eventId = await fireEvent(h, t.site.id);
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'delivered', 'delivered');

    const res = await call(api, t.key).get(`${logOf(sub.id)}/${row.id}`);

    expect(res.status).toBe(200);
    const [received] = h.receiver.to('/ok/detail');
    const { delivery } = res.body.data;
    expect(JSON.stringify(delivery.payload)).toBe(received!.body.toString('utf8'));
    expect(delivery).toEqual({
      id: row.id,
      eventId,
      event: 'ai_check.completed',
      status: 'delivered',
      createdAt: row.created_at.toISOString(),
      nextAttemptAt: null,
      redeliveryOf: null,
      payload: JSON.parse(received!.body.toString('utf8')),
      attempts: [{ n: 1, at: expect.stringMatching(ISO_8601), statusCode: 200, error: null, durationMs: expect.any(Number), responseExcerpt: 'ok', responseExcerptBase64: 'b2s=' }],
    });
  });

  it('gives a receiver’s binary answer exactly, as base64, beside a readable text', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/answer/200/nul');
    const eventId = await fireEvent(h, t.site.id);
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'delivered', 'delivered');

    const res = await call(api, t.key).get(`${logOf(sub.id)}/${row.id}`);

    const [attempt] = res.body.data.delivery.attempts;
    expect(Buffer.from(attempt.responseExcerptBase64, 'base64').equals(HOSTILE_BODIES.nul!)).toBe(true);
    expect(attempt.responseExcerpt).not.toContain('\u0000');
    expect(attempt.responseExcerpt).toContain('\uFFFD');
  });

  it('shows a failing receiver’s answers while the delivery is pending', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/fail/detail-pending');
    const eventId = await fireEvent(h, t.site.id);
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.attempt_count === 3, 'three failed attempts');

    const res = await call(api, t.key).get(`${logOf(sub.id)}/${row.id}`);

    expect(res.body.data.delivery.status).toBe('pending');
    expect(res.body.data.delivery.attempts.map((a: { n: number; responseExcerpt: string }) => [a.n, a.responseExcerpt])).toEqual([
      [1, 'receiver failure'],
      [2, 'receiver failure'],
      [3, 'receiver failure'],
    ]);
  });
});

describe('who may read and redeliver', () => {
  it('answers 404 for another account’s subscription or delivery, another subscription’s delivery and unknown ids, and changes nothing', async () => {
    const owner = await tenantWithKey(h);
    const stranger = await tenantWithKey(h);
    const sub = await owner.subscribe('/ok/tenancy');
    const sibling = await owner.subscribe('/ok/tenancy-sibling', ['scan.completed']);
    const eventId = await fireEvent(h, owner.site.id);
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'delivered', 'delivered');
    const before = await h.db('deliveries').count({ n: '*' });

    const cases = [
      call(api, stranger.key).get(logOf(sub.id)),
      call(api, stranger.key).get(`${logOf(sub.id)}/${row.id}`),
      call(api, stranger.key).post(`${logOf(sub.id)}/${row.id}/redeliver`),
      call(api, owner.key).get(`${logOf(sibling.id)}/${row.id}`),
      call(api, owner.key).post(`${logOf(sibling.id)}/${row.id}/redeliver`),
      call(api, owner.key).get(logOf('wh_doesnotexist')),
      call(api, owner.key).get(`${logOf(sub.id)}/dlv_doesnotexist`),
      call(api, owner.key).post(`${logOf(sub.id)}/dlv_doesnotexist/redeliver`),
      call(api, owner.key).get(`${logOf(sub.id)}/dlv%00x`),
    ];
    for (const res of await Promise.all(cases)) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    expect(await h.db('deliveries').count({ n: '*' })).toEqual(before);
    expect(await deliveriesOf(h, eventId, sub.id)).toHaveLength(1);
    expect(h.receiver.to('/ok/tenancy')).toHaveLength(1);
  });

  it('answers 404 for the log of a revoked subscription: its history is gone', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/ok/revoked');
    const eventId = await fireEvent(h, t.site.id);
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'delivered', 'delivered');
    expect((await call(api, t.key).get(logOf(sub.id))).status).toBe(200);

    expect((await call(api, t.key).delete(`/api/v1/webhooks/${sub.id}`)).status).toBe(200);

    expect((await call(api, t.key).get(logOf(sub.id))).status).toBe(404);
    expect((await call(api, t.key).get(`${logOf(sub.id)}/${row.id}`)).status).toBe(404);
    expect((await call(api, t.key).post(`${logOf(sub.id)}/${row.id}/redeliver`)).status).toBe(404);
    expect(await h.db('deliveries').where({ id: row.id })).toHaveLength(0);
  });

  it('needs read:webhooks to read and write:webhooks to redeliver', async () => {
    const t = await tenantWithKey(h, ['read:webhooks']);
    const writer = await tenantWithKey(h, ['write:webhooks']);
    const sub = await t.subscribe('/ok/scopes');
    const eventId = await fireEvent(h, t.site.id);
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'delivered', 'delivered');

    const redeliver = await call(api, t.key).post(`${logOf(sub.id)}/${row.id}/redeliver`);
    const read = await call(api, writer.key).get(logOf(sub.id));

    expect(redeliver.status).toBe(403);
    expect(redeliver.body.error.code).toBe('insufficient_scope');
    expect(redeliver.body.error.message).toContain('write:webhooks');
    expect(read.status).toBe(403);
    expect(read.body.error.message).toContain('read:webhooks');
    expect(await deliveriesOf(h, eventId, sub.id)).toHaveLength(1);
  });
});

describe('POST …/deliveries/{deliveryId}/redeliver while a delivery of the event is pending', () => {
  it('refuses with 409 delivery_pending while the original is pending, and stores nothing', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/fail/redeliver-pending');
    const eventId = await fireEvent(h, t.site.id);
    const row = await waitForDelivery(h, eventId, sub.id, (r) => r.attempt_count === 3, 'three failed attempts');

    const res = await call(api, t.key).post(`${logOf(sub.id)}/${row.id}/redeliver`);

    expect(res.status).toBe(409);
    expect(res.body.error).toEqual({ code: 'delivery_pending', message: expect.stringContaining(row.id) });
    expect(await deliveriesOf(h, eventId, sub.id)).toEqual([expect.objectContaining({ id: row.id, status: 'pending', attempt_count: 3 })]);
    expect(h.receiver.to('/fail/redeliver-pending')).toHaveLength(3);
  });

  it('stores one redelivery for a double click, and refuses another while that one is pending', async () => {
    const t = await tenantWithKey(h);
    const path = '/ok/double-click';
    const sub = await t.subscribe(path);
    const eventId = await fireEvent(h, t.site.id);
    const original = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'delivered', 'delivered');
    h.receiver.answerWith(path, 500);

    const clicks = await Promise.all([1, 2].map(() => call(api, t.key).post(`${logOf(sub.id)}/${original.id}/redeliver`)));

    expect(clicks.map((r) => r.status).sort()).toEqual([202, 409]);
    const accepted = clicks.find((r) => r.status === 202)!.body.data.delivery;
    expect(clicks.find((r) => r.status === 409)!.body.error.code).toBe('delivery_pending');
    expect(await deliveriesOf(h, eventId, sub.id)).toHaveLength(2);
    await waitForRow(h, accepted.id, (r) => r.attempt_count === 3, 'the redelivery to fail three times');

    const again = await call(api, t.key).post(`${logOf(sub.id)}/${original.id}/redeliver`);
    const ofRedelivery = await call(api, t.key).post(`${logOf(sub.id)}/${accepted.id}/redeliver`);

    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain(accepted.id);
    expect(ofRedelivery.status).toBe(409);
    expect(await deliveriesOf(h, eventId, sub.id)).toEqual([
      expect.objectContaining({ id: original.id, status: 'delivered', redelivery_of: null }),
      expect.objectContaining({ id: accepted.id, status: 'pending', redelivery_of: original.id }),
    ]);
  });
});
