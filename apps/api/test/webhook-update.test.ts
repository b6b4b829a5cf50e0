import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan, newId } from '@svc/core';
import { markSubscriptionDeleting } from '@svc/core/operator';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { attemptsOf, waitForDelivery, type Harness } from '@svc/dispatcher/test-support';
import { startStage, stopStage, fireEvent, ISO_8601, tenantWithKey, waitForRow } from './delivery-stories.js';
import { serviceVerifies, standardVerifies, write } from './self-service-stories.js';
import type { TestApi } from './support.js';

let h: Harness;
let api: TestApi;

/**
 * A retry comes 10 minutes after a failed attempt: the url is surely changed in between however
 * loaded the machine, and the story then makes the retry due (as if the 10 minutes had passed).
 */
const RETRY_DELAY_MS = 600_000;

beforeAll(async () => ({ h, api } = await startStage({ harness: { WEBHOOK_RETRY_DELAYS_MS: Array(6).fill(RETRY_DELAY_MS).join(',') } })));
afterAll(() => stopStage({ h, api }));

const subscriptionPath = (subscriptionId: string) => `/api/v1/webhooks/${subscriptionId}`;
const HOOK_URL = 'https://hooks.example.com/incoming';

async function storedRow(subscriptionId: string) {
  return h.db('webhook_subscriptions').where({ id: subscriptionId }).first();
}

describe('PATCH /api/v1/webhooks/{subscriptionId}', () => {
  it('sends a delivery’s queued retry to the new url: it arrives there and is delivered, with its history, failureCount and secret kept', async () => {
    const t = await tenantWithKey(h);
    const tag = uniqueTag();
    const oldPath = `/fail/moved-from-${tag}`;
    const newPath = `/ok/moved-to-${tag}`;
    const sub = await t.subscribe(oldPath);
    // Earlier failures the subscription has counted, and an earlier delivery in its log.
    const earlier = await fireEvent(h, t.site.id);
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ url: h.receiver.url(`/ok/earlier-${tag}`) });
    const earlierRow = await waitForDelivery(h, earlier, sub.id, (r) => r.status === 'delivered', 'the earlier delivery');
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ url: h.receiver.url(oldPath), failure_count: 3 });
    const before = await storedRow(sub.id);
    const eventId = await fireEvent(h, t.site.id);
    const failing = await waitForDelivery(h, eventId, sub.id, (r) => r.attempt_count === 1, 'the first attempt to fail at the old url');
    expect(failing.status).toBe('pending');

    const res = await write(api, t.key).patch(subscriptionPath(sub.id)).send({ url: h.receiver.url(newPath) });

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: {
        subscription: {
          id: sub.id,
          url: h.receiver.url(newPath),
          events: ['*'],
          createdAt: before.created_at.toISOString(),
          lastDeliveryAt: before.last_delivery_at.toISOString(),
          failureCount: 3,
          status: 'active',
        },
      },
    });
    expect(await storedRow(sub.id)).toEqual({ ...before, url: h.receiver.url(newPath) });
    // The retry's time comes: its queued job and its row both say it is due now.
    await h.db('deliveries').where({ id: failing.id }).update({ next_attempt_at: h.db.raw('now()') });
    // The retry is queued once its first attempt's outcome is recorded: wait for its job.
    const retryJob = await waitFor(async () => (await h.queues.deliveries[0]!.getDelayed()).find((job) => job.data.deliveryId === failing.id), 10_000, 'the retry job');
    expect(retryJob.data.attempt).toBe(2);
    await retryJob.promote();
    const delivered = await waitForRow(h, failing.id, (r) => r.status === 'delivered', 'the retry to be delivered at the new url');
    expect(delivered.attempt_count).toBe(2);
    expect(h.receiver.to(oldPath)).toHaveLength(1);
    const [moved, ...more] = h.receiver.to(newPath);
    expect(more).toEqual([]);
    expect(moved!.headers['x-service-delivery-id']).toBe(failing.id);
    expect(moved!.body.equals(h.receiver.to(oldPath)[0]!.body)).toBe(true);
    // Signed with the secret it always had.
    expect(standardVerifies(moved!.body, moved!.headers, sub.secret)).toBe(true);
    expect(serviceVerifies(moved!.body, moved!.headers, sub.secret)).toBe(true);
    expect((await attemptsOf(h, failing.id)).map((a) => [a.n, a.status_code])).toEqual([
      [1, 500],
      [2, 200],
    ]);
    const log = await write(api, t.key).get(`${subscriptionPath(sub.id)}/deliveries`);
    expect(log.body.data.deliveries.map((d: { id: string; status: string }) => [d.id, d.status])).toEqual([
      [failing.id, 'delivered'],
      [earlierRow.id, 'delivered'],
    ]);
    expect(await storedRow(sub.id)).toMatchObject({ secret: sub.secret, url: h.receiver.url(newPath), status: 'active' });
  });

  it('filters later events by the new events: an event no longer subscribed to is not delivered, one subscribed to is', async () => {
    const t = await tenantWithKey(h);
    const tag = uniqueTag();
    const path = `/ok/narrowed-${tag}`;
    const witnessPath = `/ok/witness-${tag}`;
    const sub = await t.subscribe(path);
    const witness = await t.subscribe(witnessPath);

    const res = await write(api, t.key).patch(subscriptionPath(sub.id)).send({ events: ['scan.completed', 'scan.completed'] });

    expect(res.status).toBe(200);
    expect(res.body.data.subscription).toMatchObject({ url: h.receiver.url(path), events: ['scan.completed'] });
    expect((await storedRow(sub.id)).events).toEqual(['scan.completed']);
    const aiCheck = await fireEvent(h, t.site.id);
    // The witness, still subscribed to everything, gets it: the event was fanned out.
    await waitForDelivery(h, aiCheck, witness.id, (r) => r.status === 'delivered', 'the witness to get the ai_check.completed');
    await waitFor(async () => (await h.db('events').where({ id: aiCheck }).first()).fanned_out_at !== null, 10_000, 'the fan-out to finish');
    const scan = await t.newScan();
    const { eventId: scanEvent } = await completeScan({ db: h.db, queues: h.queues }, { scanId: scan.id, score: 71 });
    const delivered = await waitForDelivery(h, scanEvent, sub.id, (r) => r.status === 'delivered', 'the scan.completed to be delivered');

    expect(await h.db('deliveries').where({ event_id: aiCheck, subscription_id: sub.id })).toEqual([]);
    const received = h.receiver.to(path);
    expect(received.map((r) => [r.headers['x-service-delivery-id'], r.headers['x-service-event']])).toEqual([[delivered.id, 'scan.completed']]);
  });

  it('changes only the field given and answers the subscription exactly as the list shows it', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/ok/one-field', ['scan.completed']);

    const urlOnly = await write(api, t.key).patch(subscriptionPath(sub.id)).send({ url: HOOK_URL, ignored: 'field' });
    const eventsOnly = await write(api, t.key).patch(subscriptionPath(sub.id)).send({ events: ['*'] });

    expect(urlOnly.status).toBe(200);
    expect(urlOnly.body.data.subscription).toMatchObject({ url: HOOK_URL, events: ['scan.completed'] });
    expect(eventsOnly.status).toBe(200);
    expect(eventsOnly.body.data.subscription).toEqual({
      id: sub.id,
      url: HOOK_URL,
      events: ['*'],
      createdAt: expect.stringMatching(ISO_8601),
      lastDeliveryAt: null,
      failureCount: 0,
      status: 'active',
    });
    const list = await write(api, t.key).get('/api/v1/webhooks');
    expect(list.body.data.subscriptions).toEqual([eventsOnly.body.data.subscription]);
    expect(eventsOnly.text).not.toContain(sub.secret);
    expect(await storedRow(sub.id)).toMatchObject({ url: HOOK_URL, events: ['*'], secret: sub.secret });
  });

  describe('refuses what create refuses, with the same codes, and changes nothing', () => {
    it.each([
      ['an http:// url', { url: 'http://hooks.example.com/in' }, 'invalid_url'],
      ['a null url', { url: null }, 'invalid_url'],
      ['a url of 501 characters', { url: `https://hooks.example.com/${'a'.repeat(475)}` }, 'invalid_url'],
      ['a url with a space in the host', { url: 'https://hooks example.com/in' }, 'invalid_url'],
      ['a bad url beside good events', { url: 'not a url', events: ['*'] }, 'invalid_url'],
      ['an empty events list', { events: [] }, 'invalid_events'],
      ['an unknown event', { events: ['scan.finished'] }, 'invalid_events'],
      ['"*" with a named event', { events: ['*', 'scan.completed'] }, 'invalid_events'],
      ['events as a string', { events: 'scan.completed' }, 'invalid_events'],
      ['good url, bad events', { url: HOOK_URL, events: [null] }, 'invalid_events'],
      ['neither url nor events', {}, 'invalid_body'],
      ['only unknown fields', { secret: 'f'.repeat(64), status: 'active' }, 'invalid_body'],
    ])('%s', async (_label, body, code) => {
      const t = await tenantWithKey(h);
      const sub = await t.subscribe('/ok/invalid-patch', ['scan.completed']);
      const before = await storedRow(sub.id);

      const res = await write(api, t.key).patch(subscriptionPath(sub.id)).send(body);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
      expect(await storedRow(sub.id)).toEqual(before);
    });

    it.each([
      ['broken JSON', '{"url": "https://hooks.example.com/in"'],
      ['a JSON array', JSON.stringify([{ url: HOOK_URL }])],
      ['JSON null', 'null'],
      ['an empty body', ''],
    ])('a body that is not a JSON object: %s', async (_label, raw) => {
      const t = await tenantWithKey(h);
      const sub = await t.subscribe('/ok/invalid-patch-body');
      const before = await storedRow(sub.id);

      const res = await write(api, t.key).patch(subscriptionPath(sub.id)).set('Content-Type', 'application/json').send(raw);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_body', message: expect.any(String) } });
      expect(await storedRow(sub.id)).toEqual(before);
    });
  });

  it('refuses an auto-disabled subscription with 409 subscription_disabled; it stays disabled and unchanged', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/fail/disabled-patch');
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ status: 'disabled', failure_count: 100, disabled_at: h.db.fn.now() });
    const before = await storedRow(sub.id);

    const res = await write(api, t.key).patch(subscriptionPath(sub.id)).send({ url: HOOK_URL, events: ['scan.completed'] });

    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: { code: 'subscription_disabled', message: expect.any(String) } });
    expect(await storedRow(sub.id)).toEqual(before);
    const list = await write(api, t.key).get('/api/v1/webhooks');
    expect(list.body.data.subscriptions.map((s: { id: string; status: string; url: string }) => [s.id, s.status, s.url])).toEqual([
      [sub.id, 'disabled', h.receiver.url('/fail/disabled-patch')],
    ]);
  });

  it('answers 404 for another account’s subscription, an unknown id, one being deleted and one deleted, changing nothing', async () => {
    const owner = await tenantWithKey(h);
    const stranger = await tenantWithKey(h);
    const theirs = await owner.subscribe('/ok/patch-theirs');
    const deleting = await stranger.subscribe('/ok/patch-deleting');
    const deleted = await stranger.subscribe('/ok/patch-deleted');
    await markSubscriptionDeleting(h.db, stranger.accountId, deleting.id);
    const removed = await write(api, stranger.key).delete(subscriptionPath(deleted.id));
    expect(removed.status).toBe(200);
    const theirsBefore = await storedRow(theirs.id);
    const deletingBefore = await storedRow(deleting.id);
    const body = { url: HOOK_URL };

    const answers = await Promise.all(
      [theirs.id, newId('wh'), deleting.id, deleted.id].map((id) => write(api, stranger.key).patch(subscriptionPath(id)).send(body)),
    );

    expect(answers.map((res) => res.status)).toEqual([404, 404, 404, 404]);
    for (const res of answers) expect(res.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    expect(await storedRow(theirs.id)).toEqual(theirsBefore);
    expect(await storedRow(deleting.id)).toEqual(deletingBefore);
    expect(await storedRow(deleted.id)).toBeUndefined();
  });
});
