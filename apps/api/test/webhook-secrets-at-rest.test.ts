import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createDb, createQueues, createRedis, loadConfig, SecretBox } from '@svc/core';
import { createSettingsLink, createSubscription } from '@svc/core/operator';
import { createCapturingLogger, testConfig, uniqueTag, waitFor } from '@svc/core/testing';
import type { Harness, ReceivedRequest } from '@svc/dispatcher/test-support';
import { createApp } from '../src/app.js';
import { fireEvent, startStage, stopStage, tenantWithKey } from './delivery-stories.js';
import { serviceVerifies, signaturesOf, standardVerifies, write } from './self-service-stories.js';
import type { TestApi } from './support.js';

const [current, older] = [randomBytes(32), randomBytes(32)];
/** SECRETS_ENCRYPTION_KEY listing these keys, newest first. */
const keyList = (...keys: Buffer[]) => ({ SECRETS_ENCRYPTION_KEY: keys.map((key) => key.toString('base64')).join(',') });
const boxOf = (...keys: Buffer[]) => new SecretBox(loadConfig(keyList(...keys)).secretsEncryptionKeys);
const box = boxOf(current, older);
const ENVELOPE = new RegExp(`^enc:v1:${box.currentKey!.id}:[A-Za-z0-9_-]+$`);

let h: Harness;
let api: TestApi;

// The API and the dispatcher both run with the key list `current,older`.
beforeAll(async () => ({ h, api } = await startStage({ harness: keyList(current, older) })));
afterAll(() => stopStage({ h, api }));

const rotatePath = (subscriptionId: string) => `/api/v1/webhooks/${subscriptionId}/rotate-secret`;
const storedOf = async (subscriptionId: string) =>
  (await h.db('webhook_subscriptions').where({ id: subscriptionId }).first('secret', 'previous_secret')) as { secret: string; previous_secret: string | null };

/** Fires one event and returns what the receiver got at `path` for its delivery to the subscription, once delivered. */
async function deliverTo(siteId: string, subscriptionId: string, path: string): Promise<ReceivedRequest> {
  const eventId = await fireEvent(h, siteId);
  const delivery = await waitFor(
    async () => {
      const row = await h.db('deliveries').where({ event_id: eventId, subscription_id: subscriptionId }).first();
      return row?.status === 'delivered' && row;
    },
    20_000,
    'the delivery',
  );
  return h.receiver.to(path).find((r) => r.headers['x-service-delivery-id'] === delivery.id)!;
}

describe('webhook secrets at rest through the API, with SECRETS_ENCRYPTION_KEY', () => {
  it('POST /api/v1/webhooks answers the secret once, stores only its envelope under the first key, and the delivery verifies with the answered secret', async () => {
    const t = await tenantWithKey(h);
    const path = `/ok/at-rest-${uniqueTag()}`;

    const res = await write(api, t.key).post('/api/v1/webhooks').send({ url: h.receiver.url(path), events: ['*'] });

    expect(res.status).toBe(201);
    const { id, secret } = res.body.data.subscription as { id: string; secret: string };
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const stored = await storedOf(id);
    expect(stored.secret).toMatch(ENVELOPE);
    expect(stored.secret).not.toContain(secret);
    const listed = await write(api, t.key).get('/api/v1/webhooks');
    expect(JSON.stringify(listed.body)).not.toContain(secret);
    const received = await deliverTo(t.site.id, id, path);
    expect(standardVerifies(received.body, received.headers, secret)).toBe(true);
    expect(serviceVerifies(received.body, received.headers, secret)).toBe(true);
  });

  it('POST …/rotate-secret stores the new secret and the replaced one sealed, each for its own column; during the overlap both signatures verify', async () => {
    const t = await tenantWithKey(h);
    const path = `/ok/at-rest-rotation-${uniqueTag()}`;
    // Sealed under the older key, as before the list was rotated: the rotation reads it with that key.
    const sub = await createSubscription(h.db, t.accountId, { url: h.receiver.url(path), events: ['*'] }, boxOf(older));

    const res = await write(api, t.key).post(rotatePath(sub.id)).send({ overlapSeconds: 3600 });

    expect(res.status).toBe(200);
    const rotated = res.body.data.subscription.secret as string;
    const stored = await storedOf(sub.id);
    expect(stored.secret).toMatch(ENVELOPE);
    expect(stored.previous_secret).toMatch(ENVELOPE);
    expect(`${stored.secret} ${stored.previous_secret}`).not.toMatch(new RegExp(`${rotated}|${sub.secret}`));
    // Bound to its column: the replaced secret's envelope does not open as the current one.
    expect(() => box.open(stored.previous_secret!, { table: 'webhook_subscriptions', column: 'secret', subscriptionId: sub.id })).toThrow(/does not authenticate/);
    const received = await deliverTo(t.site.id, sub.id, path);
    expect(signaturesOf(received)).toHaveLength(2);
    expect(standardVerifies(received.body, received.headers, rotated)).toBe(true);
    expect(standardVerifies(received.body, received.headers, sub.secret)).toBe(true);
    expect(serviceVerifies(received.body, received.headers, rotated)).toBe(true);
  });

  it('stores an Idempotency-Key’s answer to a create or a rotation sealed, replays it with the same secret, and forgets it when the subscription is revoked', async () => {
    const t = await tenantWithKey(h);
    const [createKey, rotateKey] = [`create-${uniqueTag()}`, `rotate-${uniqueTag()}`];
    const body = { url: h.receiver.url(`/ok/at-rest-idem-${uniqueTag()}`), events: ['*'] };

    const created = await write(api, t.key, createKey).post('/api/v1/webhooks').send(body);
    const id = created.body.data.subscription.id as string;
    const rotated = await write(api, t.key, rotateKey).post(rotatePath(id)).send({ overlapSeconds: 0 });
    const stored = await h.db('idempotency_keys').where({ account_id: t.accountId }).orderBy('key').select('key', 'response_body', 'subscription_id');
    const replayed = await write(api, t.key, createKey).post('/api/v1/webhooks').send(body);
    const deleted = await write(api, t.key).delete(`/api/v1/webhooks/${id}`);
    const replayedRotation = await write(api, t.key, rotateKey).post(rotatePath(id)).send({ overlapSeconds: 0 });

    expect([created.status, rotated.status, replayed.status]).toEqual([201, 200, 201]);
    expect(stored).toEqual([
      { key: createKey, response_body: expect.stringMatching(ENVELOPE), subscription_id: id },
      { key: rotateKey, response_body: expect.stringMatching(ENVELOPE), subscription_id: id },
    ]);
    for (const secret of [created.body.data.subscription.secret, rotated.body.data.subscription.secret]) {
      expect(stored.some((row) => String(row.response_body).includes(secret))).toBe(false);
    }
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body).toEqual(created.body);
    expect(deleted.status).toBe(200);
    expect(replayedRotation.status).toBe(404);
    expect(await h.db('idempotency_keys').where({ account_id: t.accountId, subscription_id: id })).toEqual([]);
  });

  it('refuses, with a bare 500 that changes nothing, a rotation with an overlap whose current secret no listed key opens; one without an overlap gives the subscription a working secret', async () => {
    const t = await tenantWithKey(h);
    const path = `/ok/at-rest-lost-key-${uniqueTag()}`;
    const sub = await createSubscription(h.db, t.accountId, { url: h.receiver.url(path), events: ['*'] }, boxOf(randomBytes(32)));
    const before = await storedOf(sub.id);

    const withOverlap = await write(api, t.key).post(rotatePath(sub.id)).send({ overlapSeconds: 60 });
    const unchanged = await storedOf(sub.id);
    const withoutOverlap = await write(api, t.key).post(rotatePath(sub.id)).send({ overlapSeconds: 0 });

    expect(withOverlap.status).toBe(500);
    expect(withOverlap.text).toBe('Internal Server Error');
    expect(unchanged).toEqual(before);
    expect(withoutOverlap.status).toBe(200);
    const received = await deliverTo(t.site.id, sub.id, path);
    expect(standardVerifies(received.body, received.headers, withoutOverlap.body.data.subscription.secret)).toBe(true);
  });

  it('Settings stores the secret of a webhook created in its form sealed, and shows it once', async () => {
    const t = await tenantWithKey(h);
    const link = new URL((await createSettingsLink(h.db, { accountId: t.accountId, baseUrl: 'http://settings.example.test' })).url);
    const signIn = await request(api.app)
      .get(`${link.pathname}${link.search}`)
      .set({ 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Dest': 'document', 'Sec-Fetch-Site': 'cross-site' });
    const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
    const page = await request(api.app).get('/settings/webhooks').set('Cookie', cookie);
    const [csrf, form] = [/name="_csrf" value="([^"]+)"/.exec(page.text)![1]!, /name="_form" value="([^"]+)"/.exec(page.text)![1]!];

    const created = await request(api.app)
      .post('/settings/webhooks')
      .set('Cookie', cookie)
      .type('form')
      .send(new URLSearchParams({ url: h.receiver.url(`/ok/settings-${uniqueTag()}`), events: '*', _csrf: csrf, _form: form }).toString());

    expect(created.status).toBe(201);
    const shown = /<code id="new-secret">([0-9a-f]{64})<\/code>/.exec(created.text)![1]!;
    const [row] = await h.db('webhook_subscriptions').where({ account_id: t.accountId }).select('id', 'secret');
    expect(row.secret).toMatch(ENVELOPE);
    expect(box.open(row.secret, { table: 'webhook_subscriptions', column: 'secret', subscriptionId: row.id })).toBe(shown);
  });
});

describe('createApp and SECRETS_ENCRYPTION_KEY', () => {
  it('warns once, when built, that webhook secrets are stored in plain text without the key, and never with it', async () => {
    const built = [];
    for (const env of [{}, keyList(current)]) {
      const capture = createCapturingLogger();
      const config = testConfig(env);
      const db = createDb(config.databaseUrl, { poolMax: 1 });
      const redis = createRedis(config, 'fast-fail');
      redis.on('error', () => undefined);
      const queueRedis = createRedis(config, 'bullmq');
      const queues = createQueues(queueRedis, config.queuePrefix, 1);
      const app = createApp({ config, db, redis, queues, logger: capture.logger });
      await request(app).get('/healthz');
      built.push(capture.entries.filter((entry) => entry.message.startsWith('webhook secrets are stored in plain text')));
      await Promise.allSettled([queues.fanout.waitUntilReady(), queues.deliveries[0]!.waitUntilReady()]);
      await queues.close();
      queueRedis.disconnect();
      redis.disconnect();
      await db.destroy();
    }

    expect(built).toEqual([[expect.objectContaining({ level: 'warn', message: expect.stringContaining('SECRETS_ENCRYPTION_KEY') })], []]);
  });
});
