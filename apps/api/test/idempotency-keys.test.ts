import { connect } from 'node:net';
import type { Response } from 'supertest';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, type Db } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { createIsolatedDatabase, seedAccount, uniqueTag, waitFor } from '@svc/core/testing';
import { seedFailedDeliveries, write } from './self-service-stories.js';
import { createTestApi, listen, type ListeningApi, type TestApi } from './support.js';

/**
 * Idempotency-Key on every POST and PATCH of /api/v1, against real Postgres. A database of this
 * file's own: some stories hold a table or row lock to keep a request in progress.
 */
let database: { url: string; drop(): Promise<void> };
let api: TestApi;
/** The same API over a pool whose statements give up waiting for a lock after 300 ms: a 5xx on demand. */
let impatientDb: Db;
let impatient: TestApi;

beforeAll(async () => {
  database = await createIsolatedDatabase();
  api = createTestApi({ DATABASE_URL: database.url, RATE_LIMIT_PER_MINUTE: '100000' });
  impatientDb = createDb(database.url, { poolMax: 5, bounds: { statementTimeoutMs: 30_000, lockTimeoutMs: 300 } });
  impatient = createTestApi({ DATABASE_URL: database.url, RATE_LIMIT_PER_MINUTE: '100000' }, { db: impatientDb });
});
afterAll(async () => {
  await impatient.close();
  await impatientDb.destroy();
  await api.close();
  await database.drop();
});

const HOOK_URL = 'https://hooks.example.com/incoming';
const CREATE = { url: HOOK_URL, events: ['scan.completed'] };
const subscriptionPath = (id: string) => `/api/v1/webhooks/${id}`;
const newKey = () => `key-${uniqueTag()}`;
type Call = ReturnType<ReturnType<typeof write>['post']>;

async function account() {
  return seedAccount(api.db, ['read:webhooks', 'write:webhooks']);
}
async function subscriptionsOf(accountId: string) {
  return api.db('webhook_subscriptions').where({ account_id: accountId }).orderBy('created_at');
}
async function keyRowsOf(accountId: string) {
  return api.db('idempotency_keys').where({ account_id: accountId }).orderBy('created_at');
}
/** Waits until a statement of the API waits for a lock (the request is then in progress, past the key's start). */
async function waitingOnLock(sqlStart: string): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await api.db.raw(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE ?`,
        [`${sqlStart}%`],
      );
      return rows[0].n > 0;
    },
    5_000,
    `a request waiting on a lock (${sqlStart})`,
  );
}

describe('Idempotency-Key on POST /api/v1/webhooks', () => {
  it('answers a retry with the first 201 again — the same id and secret — marked Idempotent-Replayed, and creates one subscription', async () => {
    const { accountId, key } = await account();
    const idempotencyKey = newKey();

    const first = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    const retry = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);

    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.headers['content-type']).toMatch(/^application\/json/);
    expect(retry.body).toEqual(first.body);
    expect(retry.text).toBe(first.text);
    const rows = await subscriptionsOf(accountId);
    expect(rows.map((row) => [row.id, row.secret])).toEqual([[first.body.data.subscription.id, first.body.data.subscription.secret]]);
    expect(await keyRowsOf(accountId)).toEqual([
      expect.objectContaining({
        account_id: accountId,
        key: idempotencyKey,
        state: 'done',
        response_status: 201,
        locked_until: null,
        fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/),
      }),
    ]);
    expect(JSON.parse((await keyRowsOf(accountId))[0].response_body)).toEqual(first.body);
  });

  it('creates exactly one subscription from ten identical requests sent at once with one key; every 201 is that one', async () => {
    const { accountId, key } = await account();
    const idempotencyKey = newKey();

    const answers = await Promise.all(Array.from({ length: 10 }, () => write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE)));

    const created = answers.filter((res) => res.status === 201);
    const busy = answers.filter((res) => res.status === 409);
    expect(created.length + busy.length).toBe(10);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const res of busy) expect(res.body).toEqual({ error: { code: 'idempotency_key_in_use', message: expect.any(String) } });
    const rows = await subscriptionsOf(accountId);
    expect(rows).toHaveLength(1);
    for (const res of created) expect(res.body.data.subscription).toMatchObject({ id: rows[0].id, secret: rows[0].secret });
    expect(created.filter((res) => res.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    const later = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    expect(later.status).toBe(201);
    expect(later.body.data.subscription.id).toBe(rows[0].id);
  });

  it('refuses the key with another body with 422 idempotency_key_reused, creating nothing, and still replays the first answer', async () => {
    const { accountId, key } = await account();
    const idempotencyKey = newKey();
    const first = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);

    const otherBody = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send({ ...CREATE, url: 'https://other.example/in' });
    const otherSpacing = await write(api, key, idempotencyKey).post('/api/v1/webhooks').set('Content-Type', 'application/json').send(JSON.stringify(CREATE, null, 2));

    expect(otherBody.status).toBe(422);
    expect(otherBody.body).toEqual({ error: { code: 'idempotency_key_reused', message: expect.any(String) } });
    expect(otherSpacing.status).toBe(422);
    expect((await subscriptionsOf(accountId)).map((row) => row.id)).toEqual([first.body.data.subscription.id]);
    const again = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
  });

  it('compares the body after its Content-Encoding is decoded: the same JSON gzipped is the same request', async () => {
    const { accountId, key } = await account();
    const idempotencyKey = newKey();
    const first = await write(api, key, idempotencyKey).post('/api/v1/webhooks').set('Content-Type', 'application/json').send(JSON.stringify(CREATE));

    const gzipped = write(api, key, idempotencyKey).post('/api/v1/webhooks').set('Content-Type', 'application/json').set('Content-Encoding', 'gzip');
    gzipped.write(gzipSync(JSON.stringify(CREATE)));
    const retry = await gzipped;

    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect(await subscriptionsOf(accountId)).toHaveLength(1);
  });

  it('refuses the key on another path or with another method with 422, changing nothing', async () => {
    const { accountId, key } = await account();
    const idempotencyKey = newKey();
    const first = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    const id = first.body.data.subscription.id as string;
    const before = (await subscriptionsOf(accountId))[0];

    const rotate = await write(api, key, idempotencyKey).post(`${subscriptionPath(id)}/rotate-secret`).send(CREATE);
    const patch = await write(api, key, idempotencyKey).patch('/api/v1/webhooks').send(CREATE);
    const patchOne = await write(api, key, idempotencyKey).patch(subscriptionPath(id)).send(CREATE);

    expect([rotate.status, patchOne.status]).toEqual([422, 422]);
    expect(rotate.body.error.code).toBe('idempotency_key_reused');
    expect(patchOne.body.error.code).toBe('idempotency_key_reused');
    // No PATCH route at /webhooks itself: 404 before any key is looked at.
    expect(patch.status).toBe(404);
    expect(await subscriptionsOf(accountId)).toEqual([before]);
  });

  it('keeps keys per account: two accounts using the same key each get their own subscription and answer', async () => {
    const one = await account();
    const two = await account();
    const idempotencyKey = newKey();

    const a = await write(api, one.key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    const b = await write(api, two.key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    const aAgain = await write(api, one.key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    const bAgain = await write(api, two.key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);

    expect([a.status, b.status]).toEqual([201, 201]);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(a.body.data.subscription.id).not.toBe(b.body.data.subscription.id);
    expect(a.body.data.subscription.secret).not.toBe(b.body.data.subscription.secret);
    expect(aAgain.body).toEqual(a.body);
    expect(bAgain.body).toEqual(b.body);
    expect((await subscriptionsOf(one.accountId)).map((row) => row.id)).toEqual([a.body.data.subscription.id]);
    expect((await subscriptionsOf(two.accountId)).map((row) => row.id)).toEqual([b.body.data.subscription.id]);
    expect((await keyRowsOf(one.accountId)).map((row) => row.key)).toEqual([idempotencyKey]);
    expect((await keyRowsOf(two.accountId)).map((row) => row.key)).toEqual([idempotencyKey]);
  });

  it('replays a failed validation too: 400 invalid_url again, and the corrected body with that key is another request (422)', async () => {
    const { accountId, key } = await account();
    const idempotencyKey = newKey();
    const bad = { url: 'http://hooks.example.com/in', events: ['*'] };

    const first = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(bad);
    const retry = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(bad);
    const corrected = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send({ ...bad, url: HOOK_URL });

    expect(first.status).toBe(400);
    expect(first.body).toEqual({ error: { code: 'invalid_url', message: expect.any(String) } });
    expect(retry.status).toBe(400);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect(corrected.status).toBe(422);
    expect(await subscriptionsOf(accountId)).toEqual([]);
    expect(await keyRowsOf(accountId)).toEqual([expect.objectContaining({ key: idempotencyKey, state: 'done', response_status: 400 })]);
  });

  it('changes nothing without the header: the same request twice creates two subscriptions and stores no key', async () => {
    const { accountId, key } = await account();

    const first = await write(api, key).post('/api/v1/webhooks').send(CREATE);
    const second = await write(api, key).post('/api/v1/webhooks').send(CREATE);

    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(first.body.data.subscription.id).not.toBe(second.body.data.subscription.id);
    expect(await subscriptionsOf(accountId)).toHaveLength(2);
    expect(await keyRowsOf(accountId)).toEqual([]);
  });

  it('forgets a key after 24 hours: the same key then makes a new request, whatever its body', async () => {
    const { accountId, key } = await account();
    const idempotencyKey = newKey();
    const first = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    await api.db('idempotency_keys').where({ account_id: accountId, key: idempotencyKey }).update({ created_at: api.db.raw(`clock_timestamp() - interval '23 hours 59 minutes'`) });
    const stillReplayed = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    await api.db('idempotency_keys').where({ account_id: accountId, key: idempotencyKey }).update({ created_at: api.db.raw(`clock_timestamp() - interval '24 hours 1 minute'`) });

    const afresh = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send({ ...CREATE, events: ['*'] });

    expect(stillReplayed.headers['idempotent-replayed']).toBe('true');
    expect(stillReplayed.body).toEqual(first.body);
    expect(afresh.status).toBe(201);
    expect(afresh.headers['idempotent-replayed']).toBeUndefined();
    expect(afresh.body.data.subscription.id).not.toBe(first.body.data.subscription.id);
    expect(await subscriptionsOf(accountId)).toHaveLength(2);
    expect(await keyRowsOf(accountId)).toEqual([expect.objectContaining({ key: idempotencyKey, state: 'done', response_status: 201 })]);
    const replay = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send({ ...CREATE, events: ['*'] });
    expect(replay.body).toEqual(afresh.body);
  });
});

describe('the shape of an Idempotency-Key', () => {
  describe('refuses a key that is not 1–255 printable ASCII characters given once with 400 invalid_idempotency_key, doing nothing', () => {
    it.each([
      ['256 characters', (test: Call) => test.set('Idempotency-Key', 'k'.repeat(256))],
      ['an empty value', (test: Call) => test.set('Idempotency-Key', '')],
      ['a non-ASCII character', (test: Call) => test.set('Idempotency-Key', 'clé-1')],
      ['a control character (tab)', (test: Call) => test.set('Idempotency-Key', 'key\t1')],
      ['two headers', (test: Call) => test.set('Idempotency-Key', ['key-1', 'key-2'] as unknown as string)],
      ['two headers with the same value', (test: Call) => test.set('Idempotency-Key', ['key-1', 'key-1'] as unknown as string)],
    ])('%s', async (_label, withKey) => {
      const { accountId, key } = await account();

      const res = await withKey(write(api, key).post('/api/v1/webhooks')).send(CREATE);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_idempotency_key', message: expect.any(String) } });
      expect(await subscriptionsOf(accountId)).toEqual([]);
      expect(await keyRowsOf(accountId)).toEqual([]);
    });
  });

  it('takes 255 printable characters, a single one, and spaces and symbols inside', async () => {
    const { accountId, key } = await account();
    const keys = ['k'.repeat(255), '7', 'a b ~!@#$%^&*()_+{}|:"<>?`-=[]\\;\',./'];

    const answers = await Promise.all(keys.map((k) => write(api, key, k).post('/api/v1/webhooks').send(CREATE)));

    expect(answers.map((res) => res.status)).toEqual([201, 201, 201]);
    expect((await keyRowsOf(accountId)).map((row) => row.key).sort()).toEqual([...keys].sort());
  });

  it('is checked on PATCH, rotate-secret, recover and redeliver too, which then change nothing', async () => {
    const { accountId, key } = await account();
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    const { deliveryIds } = await seedFailedDeliveries(api.db, { accountId, subscriptionId: sub.id, count: 1, firstFailedAt: new Date('2026-11-20T00:00:00Z'), stepMs: 1 });
    const before = await api.db('webhook_subscriptions').where({ id: sub.id }).first();
    const tooLong = 'k'.repeat(256);

    const answers = [
      await write(api, key, tooLong).patch(subscriptionPath(sub.id)).send({ url: 'https://changed.example/in' }),
      await write(api, key, tooLong).post(`${subscriptionPath(sub.id)}/rotate-secret`).send({}),
      await write(api, key, tooLong).post(`${subscriptionPath(sub.id)}/recover`).send({ since: '2026-11-19T00:00:00Z' }),
      await write(api, key, tooLong).post(`${subscriptionPath(sub.id)}/deliveries/${deliveryIds[0]}/redeliver`),
    ];

    expect(answers.map((res) => [res.status, res.body.error?.code])).toEqual(Array(4).fill([400, 'invalid_idempotency_key']));
    expect(await api.db('webhook_subscriptions').where({ id: sub.id }).first()).toEqual(before);
    expect(await api.db('deliveries').where({ subscription_id: sub.id })).toHaveLength(1);
    expect(await keyRowsOf(accountId)).toEqual([]);
  });
});

describe('Idempotency-Key on the other writes', () => {
  it('rotate-secret: a retry gets the same new secret, and the secret is rotated once', async () => {
    const { accountId, key } = await account();
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    const idempotencyKey = newKey();

    const first = await write(api, key, idempotencyKey).post(`${subscriptionPath(sub.id)}/rotate-secret`).send({ overlapSeconds: 600 });
    const retry = await write(api, key, idempotencyKey).post(`${subscriptionPath(sub.id)}/rotate-secret`).send({ overlapSeconds: 600 });

    expect(first.status).toBe(200);
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(first.body);
    // Rotated twice, the replaced secret would be the first rotation's.
    expect(await api.db('webhook_subscriptions').where({ id: sub.id }).first('secret', 'previous_secret')).toEqual({
      secret: first.body.data.subscription.secret,
      previous_secret: sub.secret,
    });
  });

  it('PATCH: a retry gets the first answer and does nothing, even after another change', async () => {
    const { accountId, key } = await account();
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    const idempotencyKey = newKey();
    const first = await write(api, key, idempotencyKey).patch(subscriptionPath(sub.id)).send({ url: 'https://first.example/in' });
    const other = await write(api, key).patch(subscriptionPath(sub.id)).send({ url: 'https://second.example/in' });

    const retry = await write(api, key, idempotencyKey).patch(subscriptionPath(sub.id)).send({ url: 'https://first.example/in' });

    expect([first.status, other.status, retry.status]).toEqual([200, 200, 200]);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect(retry.body.data.subscription.url).toBe('https://first.example/in');
    expect((await api.db('webhook_subscriptions').where({ id: sub.id }).first()).url).toBe('https://second.example/in');
  });

  it('recover: a retry gets the same count and stores nothing more, where the same call without a key finds nothing left to send', async () => {
    const { accountId, key } = await account();
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    await seedFailedDeliveries(api.db, { accountId, subscriptionId: sub.id, count: 3, firstFailedAt: new Date('2026-11-20T00:00:00Z'), stepMs: 1000 });
    const body = { since: '2026-11-19T00:00:00Z', until: '2026-11-21T00:00:00Z' };
    const idempotencyKey = newKey();

    const first = await write(api, key, idempotencyKey).post(`${subscriptionPath(sub.id)}/recover`).send(body);
    const retry = await write(api, key, idempotencyKey).post(`${subscriptionPath(sub.id)}/recover`).send(body);
    const unkeyed = await write(api, key).post(`${subscriptionPath(sub.id)}/recover`).send(body);

    expect(first.status).toBe(202);
    expect(first.body.data.recovery.count).toBe(3);
    expect(retry.status).toBe(202);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect(unkeyed.body.data.recovery.count).toBe(0);
    expect(await api.db('deliveries').where({ subscription_id: sub.id }).whereNotNull('redelivery_of')).toHaveLength(3);
  });

  it('redeliver: the same key twice makes one new delivery, and a 409 answered with a key is replayed as a 409', async () => {
    const { accountId, key } = await account();
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    const { deliveryIds } = await seedFailedDeliveries(api.db, { accountId, subscriptionId: sub.id, count: 1, firstFailedAt: new Date('2026-11-20T00:00:00Z'), stepMs: 1 });
    const path = `${subscriptionPath(sub.id)}/deliveries/${deliveryIds[0]}/redeliver`;
    const idempotencyKey = newKey();

    const first = await write(api, key, idempotencyKey).post(path);
    const retry = await write(api, key, idempotencyKey).post(path);
    const unkeyed = await write(api, key).post(path);
    const pendingKey = newKey();
    const refused = await write(api, key, pendingKey).post(path);

    expect(first.status).toBe(202);
    expect(retry.status).toBe(202);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect(unkeyed.status).toBe(409);
    expect(unkeyed.body.error.code).toBe('delivery_pending');
    expect(refused.status).toBe(409);
    const redeliveries = await api.db('deliveries').where({ subscription_id: sub.id, redelivery_of: deliveryIds[0] });
    expect(redeliveries.map((row) => row.id)).toEqual([first.body.data.delivery.id]);
    // Once the redelivery has failed too, that key still answers its 409: the answer is replayed, not the request.
    await api.db('deliveries').where({ id: first.body.data.delivery.id }).update({ status: 'failed', attempt_count: 7, next_attempt_at: null, finished_at: api.db.fn.now() });
    const replayedRefusal = await write(api, key, pendingKey).post(path);
    expect(replayedRefusal.status).toBe(409);
    expect(replayedRefusal.headers['idempotent-replayed']).toBe('true');
    expect(replayedRefusal.body).toEqual(refused.body);
    expect(await api.db('deliveries').where({ subscription_id: sub.id })).toHaveLength(2);
  });
});

describe('a request in progress with a key', () => {
  it('answers another request with the key 409 idempotency_key_in_use (or 422 for another body) until it is answered, then replays its answer', async () => {
    const { accountId, key } = await account();
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    const idempotencyKey = newKey();
    const body = { url: 'https://moved.example/in' };
    // A transaction holding the subscription's row: the PATCH waits for it.
    const holder = await api.db.transaction();
    let first: Promise<Response>;
    let busy: Response;
    let otherBody: Response;
    try {
      await holder('webhook_subscriptions').where({ id: sub.id }).forUpdate().first();
      first = write(api, key, idempotencyKey).patch(subscriptionPath(sub.id)).send(body).then((res) => res);
      await waitingOnLock('select "status" from "webhook_subscriptions"');

      busy = await write(api, key, idempotencyKey).patch(subscriptionPath(sub.id)).send(body);
      otherBody = await write(api, key, idempotencyKey).patch(subscriptionPath(sub.id)).send({ url: 'https://elsewhere.example/in' });
    } finally {
      await holder.commit();
    }
    const answered = await first;
    const replay = await write(api, key, idempotencyKey).patch(subscriptionPath(sub.id)).send(body);

    expect(busy.status).toBe(409);
    expect(busy.body).toEqual({ error: { code: 'idempotency_key_in_use', message: expect.any(String) } });
    expect(otherBody.status).toBe(422);
    expect(answered.status).toBe(200);
    expect(answered.headers['idempotent-replayed']).toBeUndefined();
    expect(replay.status).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(answered.body);
    expect((await api.db('webhook_subscriptions').where({ id: sub.id }).first()).url).toBe('https://moved.example/in');
  });

  it('lets go of the key on a 5xx: a retry with it runs afresh', async () => {
    const { accountId, key } = await account();
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    const idempotencyKey = newKey();
    const body = { events: ['scan.completed'] };
    const holder = await api.db.transaction();
    let failed: Response;
    try {
      await holder('webhook_subscriptions').where({ id: sub.id }).forUpdate().first();
      // The impatient pool gives up on the row lock after 300 ms: a 500.
      failed = await write(impatient, key, idempotencyKey).patch(subscriptionPath(sub.id)).send(body);
    } finally {
      await holder.commit();
    }

    expect(failed.status).toBe(500);
    // Let go before the 500 was sent: the client's immediate retry is a new request.
    expect(await keyRowsOf(accountId)).toEqual([]);
    const retry = await write(impatient, key, idempotencyKey).patch(subscriptionPath(sub.id)).send(body);
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(retry.body.data.subscription.events).toEqual(['scan.completed']);
    expect((await api.db('webhook_subscriptions').where({ id: sub.id }).first()).events).toEqual(['scan.completed']);
    expect(await keyRowsOf(accountId)).toEqual([expect.objectContaining({ key: idempotencyKey, state: 'done', response_status: 200 })]);
  });

  describe('whose client went away before the answer', () => {
    let server: ListeningApi;
    beforeAll(async () => {
      server = await listen(api);
    });
    afterAll(async () => {
      await server.close();
    });

    it('still runs to its end and stores its answer: the retry gets that answer, and one subscription exists', async () => {
      const { accountId, key } = await account();
      const idempotencyKey = newKey();
      const body = JSON.stringify(CREATE);
      // Inserts into webhook_subscriptions wait for this lock; the key's own table does not.
      const holder = await api.db.transaction();
      let whileRunning: Response;
      try {
        await holder.raw('LOCK TABLE webhook_subscriptions IN SHARE MODE');
        const socket = connect(server.port, '127.0.0.1');
        socket.on('error', () => undefined);
        await new Promise((resolve) => socket.once('connect', resolve));
        socket.write(
          `POST /api/v1/webhooks HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer ${key}\r\nIdempotency-Key: ${idempotencyKey}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        await waitingOnLock('insert into "webhook_subscriptions"');
        // The client gives up: its connection is reset with no answer read.
        socket.resetAndDestroy();
        await new Promise((resolve) => socket.once('close', resolve));
        whileRunning = await write(api, key, idempotencyKey).post('/api/v1/webhooks').set('Content-Type', 'application/json').send(body);
      } finally {
        await holder.commit();
      }
      const stored = await waitFor(async () => (await keyRowsOf(accountId)).find((row) => row.state === 'done'), 5_000, 'the abandoned request to store its answer');

      const retry = await write(api, key, idempotencyKey).post('/api/v1/webhooks').set('Content-Type', 'application/json').send(body);

      expect(whileRunning.status).toBe(409);
      expect(whileRunning.body.error.code).toBe('idempotency_key_in_use');
      expect(stored.response_status).toBe(201);
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.body).toEqual(JSON.parse(stored.response_body));
      const rows = await subscriptionsOf(accountId);
      expect(rows.map((row) => [row.id, row.secret])).toEqual([[retry.body.data.subscription.id, retry.body.data.subscription.secret]]);
    });
  });
});

describe('an answer that cannot be stored, and a revoked subscription', () => {
  it('sends a bare 500 instead of an answer it could not store, and never runs the request again under that key', async () => {
    const { accountId, key } = await account();
    const idempotencyKey = `unstorable-${uniqueTag()}`;
    // Postgres refuses to store this key's answer, as it might refuse any write.
    await api.db.raw(`CREATE OR REPLACE FUNCTION refuse_answer() RETURNS trigger AS $$ BEGIN
        IF NEW.state = 'done' AND NEW.key LIKE 'unstorable-%' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`);
    await api.db.raw('CREATE TRIGGER refuse_answer BEFORE UPDATE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION refuse_answer()');
    let first: Response;
    try {
      first = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);
    } finally {
      await api.db.raw('DROP TRIGGER refuse_answer ON idempotency_keys');
    }

    const retry = await write(api, key, idempotencyKey).post('/api/v1/webhooks').send(CREATE);

    expect(first.status).toBe(500);
    expect(first.text).toBe('Internal Server Error');
    expect(retry.status).toBe(409);
    expect(retry.body.error.code).toBe('idempotency_key_in_use');
    // The create was done once; the key still stands for it.
    expect(await subscriptionsOf(accountId)).toHaveLength(1);
    expect((await keyRowsOf(accountId)).map((row) => row.state)).toEqual(['in_progress']);
  });

  it('forgets the stored answers about a subscription when it is revoked: its secret is not kept, and a replayed rotation is a new request (404)', async () => {
    const { accountId, key } = await account();
    const createKey = newKey();
    const rotateKey = newKey();
    const created = await write(api, key, createKey).post('/api/v1/webhooks').send(CREATE);
    const id = created.body.data.subscription.id as string;
    const rotated = await write(api, key, rotateKey).post(`${subscriptionPath(id)}/rotate-secret`).send({ overlapSeconds: 0 });
    const other = await write(api, key, newKey()).post('/api/v1/webhooks').send({ ...CREATE, url: `${HOOK_URL}/other` });
    expect([created.status, rotated.status, other.status]).toEqual([201, 200, 201]);

    const deleted = await write(api, key).delete(subscriptionPath(id));
    const replayedRotation = await write(api, key, rotateKey).post(`${subscriptionPath(id)}/rotate-secret`).send({ overlapSeconds: 0 });

    expect(deleted.status).toBe(200);
    expect(replayedRotation.status).toBe(404);
    const rows = await keyRowsOf(accountId);
    const bodies = rows.map((row) => String(row.response_body ?? ''));
    expect(bodies.some((body) => body.includes(created.body.data.subscription.secret) || body.includes(rotated.body.data.subscription.secret))).toBe(false);
    // Answers about other subscriptions stay.
    expect(bodies.some((body) => body.includes(other.body.data.subscription.id))).toBe(true);
  });
});
