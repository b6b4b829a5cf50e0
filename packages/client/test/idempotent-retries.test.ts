import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun } from '@svc/core';
import { seedAccount, seedSite, waitFor } from '@svc/core/testing';
import { SiteVisibilityClient, type RetryInfo } from '../src/index.js';
import { startAnswerLosingProxy, type AnswerLosingProxy } from './answer-losing-proxy.js';
import { errorOf, startApi, type ListeningApi } from './support.js';

let api: ListeningApi;
let proxy: AnswerLosingProxy;

beforeAll(async () => {
  api = await startApi({ RATE_LIMIT_PER_MINUTE: '100000' });
  proxy = await startAnswerLosingProxy(api.baseUrl);
});
afterAll(async () => {
  await proxy.close();
  await api.close();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A customer whose client goes through the proxy, retrying at once, and the retries it made. */
async function customer(extra: { maxRetries?: number; retryBaseDelayMs?: number } = {}) {
  const { accountId, key } = await seedAccount(api.db, ['read:sites', 'read:webhooks', 'write:webhooks']);
  const retries: RetryInfo[] = [];
  const client = new SiteVisibilityClient({ apiKey: key, baseUrl: proxy.baseUrl, retryBaseDelayMs: 1, onRetry: (info) => retries.push(info), ...extra });
  return { accountId, client, retries };
}

/** The proxy's record of the requests to a path, from index `from` on. */
const requestsTo = (path: string, from = 0) => proxy.requests.slice(from).filter((r) => r.path === `/api/v1${path}`);

describe('POST and PATCH retried with one Idempotency-Key, against the real API', () => {
  it('retries a create whose answer was lost with the same key, and the account has one subscription, answered with its secret', async () => {
    const { accountId, client, retries } = await customer();
    const from = proxy.requests.length;
    proxy.loseNextAnswer('POST');

    const created = await client.webhooks.create({ url: 'https://hooks.example.com/lost-answer', events: ['*'] });

    const tries = requestsTo('/webhooks', from);
    expect(tries.map((t) => [t.method, t.status, t.replayed, t.answered])).toEqual([
      ['POST', 201, false, false],
      ['POST', 201, true, true],
    ]);
    expect(tries[0]!.headers['idempotency-key']).toMatch(UUID);
    expect(tries[1]!.headers['idempotency-key']).toBe(tries[0]!.headers['idempotency-key']);
    expect(retries.map((r) => [r.method, r.reason])).toEqual([['POST', 'network_error']]);
    const stored = await api.db('webhook_subscriptions').where({ account_id: accountId }).select('id', 'secret');
    expect(stored).toEqual([{ id: created.id, secret: created.secret }]);
  });

  it('a rotation, a change, a recovery and a redelivery whose answers were lost each take effect once and answer as the first try did', async () => {
    const { accountId, client } = await customer();
    const site = await seedSite(api.db, accountId);
    const sub = await client.webhooks.create({ url: 'https://hooks.example.com/once', events: ['ai_check.completed'] });
    // A delivery that failed for good a minute ago (no dispatcher runs against this database).
    const { eventId } = await completeAiMonitorRun({ db: api.db, queues: api.queues }, { siteId: site.id, compositeScore: 50 });
    const failedAt = new Date(Date.now() - 60_000);
    const [failed] = await api.db('deliveries').where({ event_id: eventId, subscription_id: sub.id }).update({ status: 'failed', finished_at: failedAt, attempt_count: 7 }).returning('id');
    const from = proxy.requests.length;

    proxy.loseNextAnswer('POST');
    const rotated = await client.webhooks.rotateSecret(sub.id, { overlapSeconds: 600 });
    proxy.loseNextAnswer('PATCH');
    const changed = await client.webhooks.update(sub.id, { url: 'https://hooks.example.com/once-moved' });
    proxy.loseNextAnswer('POST');
    const recovery = await client.webhooks.recover(sub.id, { since: new Date(failedAt.getTime() - 1_000) });
    const recoveredAs = await api.db('deliveries').where({ redelivery_of: failed.id }).select('id');
    await api.db('deliveries').whereIn('id', recoveredAs.map((d) => d.id)).update({ status: 'failed', finished_at: new Date(), next_attempt_at: null });
    proxy.loseNextAnswer('POST');
    const redelivery = await client.deliveries.redeliver(sub.id, failed.id);

    for (const path of [`/webhooks/${sub.id}/rotate-secret`, `/webhooks/${sub.id}`, `/webhooks/${sub.id}/recover`, `/webhooks/${sub.id}/deliveries/${failed.id}/redeliver`]) {
      const tries = requestsTo(path, from);
      expect([path, tries.map((t) => [t.replayed, t.answered])]).toEqual([path, [[false, false], [true, true]]]);
      expect(tries[1]!.headers['idempotency-key']).toBe(tries[0]!.headers['idempotency-key']);
    }
    // Rotated once: the secret it answered signs, and the one it replaced is the original.
    const row = await api.db('webhook_subscriptions').where({ id: sub.id }).first('secret', 'previous_secret', 'url');
    expect(row).toEqual({ secret: rotated.secret, previous_secret: sub.secret, url: 'https://hooks.example.com/once-moved' });
    expect(changed.url).toBe('https://hooks.example.com/once-moved');
    // Recovered once, and the answer counts it (a second recovery would have found it pending: 0).
    expect(recovery.count).toBe(1);
    expect(recoveredAs).toHaveLength(1);
    // Redelivered once (a second redelivery would have been refused: delivery_pending).
    expect(await api.db('deliveries').where({ redelivery_of: failed.id }).pluck('id')).toEqual(expect.arrayContaining([recoveredAs[0]!.id, redelivery.id]));
    expect(await api.db('deliveries').where({ redelivery_of: failed.id }).count({ n: '*' })).toEqual([{ n: '2' }]);
  });

  it('sends a new key per call, the caller’s own key when given; the same key with another body is refused as idempotency_key_reused, with the same body answered as the first', async () => {
    const { accountId, client, retries } = await customer();
    const from = proxy.requests.length;
    const key = `nightly-job:${accountId}:create-hook`;

    const a = await client.webhooks.create({ url: 'https://hooks.example.com/a', events: ['*'] });
    const b = await client.webhooks.create({ url: 'https://hooks.example.com/b', events: ['*'] });
    const mine = await client.webhooks.create({ url: 'https://hooks.example.com/mine', events: ['*'] }, { idempotencyKey: key });
    const repeated = await client.webhooks.create({ url: 'https://hooks.example.com/mine', events: ['*'] }, { idempotencyKey: key });
    const reused = await errorOf(client.webhooks.create({ url: 'https://hooks.example.com/other', events: ['*'] }, { idempotencyKey: key }));

    const keys = requestsTo('/webhooks', from).map((t) => t.headers['idempotency-key']);
    expect(keys[0]).toMatch(UUID);
    expect(keys[1]).toMatch(UUID);
    expect(keys[0]).not.toBe(keys[1]);
    expect(keys.slice(2)).toEqual([key, key, key]);
    expect(repeated).toEqual(mine);
    expect(reused).toMatchObject({ code: 'idempotency_key_reused', status: 422 });
    expect(retries).toEqual([]);
    expect((await api.db('webhook_subscriptions').where({ account_id: accountId }).pluck('id')).sort()).toEqual([a.id, b.id, mine.id].sort());
  });

  it('waits while the first call with its key is still being answered (idempotency_key_in_use), then gets that call’s answer', async () => {
    const { client, retries } = await customer({ retryBaseDelayMs: 200, maxRetries: 5 });
    const sub = await client.webhooks.create({ url: 'https://hooks.example.com/busy', events: ['*'] });
    const key = `busy-${sub.id}`;
    const change = { url: 'https://hooks.example.com/busy-moved' };
    // The subscription's row is held, so the first PATCH waits inside the API with its key taken.
    const holder = await api.db.transaction();
    await holder('webhook_subscriptions').where({ id: sub.id }).forUpdate().first('id');
    const first = client.webhooks.update(sub.id, change, { idempotencyKey: key });
    await waitFor(async () => (await api.db('idempotency_keys').where({ key }).first('state'))?.state === 'in_progress', 5_000, 'the first PATCH to take its key');
    const second = client.webhooks.update(sub.id, change, { idempotencyKey: key });
    second.catch(() => undefined); // awaited below
    await waitFor(() => retries.length > 0, 5_000, 'the second PATCH to be told to wait');
    await holder.commit();
    const [answer, repeat] = await Promise.all([first, second]);

    expect(retries[0]).toMatchObject({ method: 'PATCH', reason: 'idempotency_key_in_use', error: expect.objectContaining({ code: 'idempotency_key_in_use', status: 409 }) });
    expect(repeat).toEqual(answer);
    expect(requestsTo(`/webhooks/${sub.id}`).at(-1)).toMatchObject({ status: 200, replayed: true });
  });

  it('retries a rotation that timed out while the API still worked on it, waits out idempotency_key_in_use, and the secret is rotated once', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const retries: RetryInfo[] = [];
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl, timeoutMs: 300, retryBaseDelayMs: 200, maxRetries: 8, onRetry: (info) => retries.push(info) });
    const sub = await client.webhooks.create({ url: 'https://hooks.example.com/slow', events: ['*'] });
    // The subscription's row is held: the rotation's UPDATE waits inside the API past the client's timeout.
    const holder = await api.db.transaction();
    await holder('webhook_subscriptions').where({ id: sub.id }).forUpdate().first('id');
    const rotation = client.webhooks.rotateSecret(sub.id, { overlapSeconds: 60 });
    rotation.catch(() => undefined); // awaited below

    await waitFor(() => retries.some((r) => r.reason === 'idempotency_key_in_use'), 10_000, 'a retry told the first try is still in progress');
    await holder.commit();
    const rotated = await rotation;

    expect(retries[0]).toMatchObject({ method: 'POST', reason: 'network_error' });
    expect(retries[0]!.error.message).toContain('no answer within 300 ms');
    expect(retries.slice(1).every((r) => r.reason === 'idempotency_key_in_use' || r.reason === 'network_error')).toBe(true);
    const row = await api.db('webhook_subscriptions').where({ id: sub.id }).first('secret', 'previous_secret');
    expect(row).toEqual({ secret: rotated.secret, previous_secret: sub.secret });
    expect(await api.db('idempotency_keys').where({ account_id: accountId }).count({ n: '*' })).toEqual([{ n: '2' }]);
  });

  it('refuses a malformed key of the caller’s before sending anything', async () => {
    const { client } = await customer();
    const from = proxy.requests.length;

    await expect(client.webhooks.create({ url: 'https://hooks.example.com/x', events: ['*'] }, { idempotencyKey: 'ключ' })).rejects.toThrow(TypeError);
    await expect(client.webhooks.create({ url: 'https://hooks.example.com/x', events: ['*'] }, { idempotencyKey: 'x'.repeat(256) })).rejects.toThrow(TypeError);

    expect(proxy.requests.length).toBe(from);
  });
});
