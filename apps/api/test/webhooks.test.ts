import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { deliveryJobId, enqueueDeliveries, newId } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { seedAccount } from '@svc/core/testing';
import { bearer, createTestApi, type TestApi } from './support.js';

let api: TestApi;

beforeAll(() => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' });
});
afterAll(async () => {
  await api.close();
});

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const HOOK_URL = 'https://hooks.example.com/incoming';

const post = (key: string) => request(api.app).post('/api/v1/webhooks').set(bearer(key));

async function storedSubscriptions(accountId: string) {
  return api.db('webhook_subscriptions').where({ account_id: accountId }).orderBy('created_at');
}

/** A header of the request as it went on the wire. */
function sentHeader(res: request.Response, name: string): unknown {
  return (res as unknown as { req: { getHeader(name: string): unknown } }).req.getHeader(name);
}

/** Waits until the database clock has moved past `after`, so the next insert is strictly newer. */
async function databaseClockPast(after: Date): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await api.db.raw('SELECT clock_timestamp()::timestamptz(3) > ? AS later', [after]);
    if (rows[0].later) return;
  }
  throw new Error('database clock did not move');
}

describe('POST /api/v1/webhooks', () => {
  it('creates a subscription: 201 with id, url, events, a 64-hex secret (also in whsec_ form) and createdAt, and stores it active', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await post(key).send({ url: HOOK_URL, events: ['scan.completed', 'power_up.deployed'] });

    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      data: {
        subscription: {
          id: expect.any(String),
          url: HOOK_URL,
          events: ['scan.completed', 'power_up.deployed'],
          secret: expect.stringMatching(/^[0-9a-f]{64}$/),
          standardWebhooksSecret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+=*$/),
          createdAt: expect.stringMatching(ISO_8601),
        },
      },
    });
    const created = res.body.data.subscription;
    expect(Buffer.from(created.standardWebhooksSecret.slice('whsec_'.length), 'base64').toString('utf8')).toBe(created.secret);
    const rows = await storedSubscriptions(accountId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      id: created.id,
      account_id: accountId,
      url: HOOK_URL,
      events: ['scan.completed', 'power_up.deployed'],
      secret: created.secret,
      status: 'active',
      failure_count: 0,
      last_delivery_at: null,
      disabled_at: null,
      deleting_at: null,
    });
    expect(rows[0].created_at.toISOString()).toBe(created.createdAt);
  });

  it('gives every subscription its own secret', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const first = await post(key).send({ url: HOOK_URL, events: ['*'] });
    const second = await post(key).send({ url: HOOK_URL, events: ['*'] });

    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(first.body.data.subscription.id).not.toBe(second.body.data.subscription.id);
    expect(first.body.data.subscription.secret).not.toBe(second.body.data.subscription.secret);
    const secrets = (await storedSubscriptions(accountId)).map((row) => row.secret);
    expect(new Set(secrets).size).toBe(2);
  });

  it('accepts ["*"] for every current and future event', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await post(key).send({ url: HOOK_URL, events: ['*'] });

    expect(res.status).toBe(201);
    expect(res.body.data.subscription.events).toEqual(['*']);
    expect((await storedSubscriptions(accountId))[0].events).toEqual(['*']);
  });

  it('accepts each event type of spec §6.1', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const all = ['scan.completed', 'ai_check.completed', 'power_up.deployed'];

    const res = await post(key).send({ url: HOOK_URL, events: all });

    expect(res.status).toBe(201);
    expect((await storedSubscriptions(accountId))[0].events).toEqual(all);
  });

  it('collapses duplicate events, keeping the first-seen order', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await post(key).send({
      url: HOOK_URL,
      events: ['ai_check.completed', 'scan.completed', 'ai_check.completed', 'scan.completed'],
    });

    expect(res.status).toBe(201);
    expect(res.body.data.subscription.events).toEqual(['ai_check.completed', 'scan.completed']);
    expect((await storedSubscriptions(accountId))[0].events).toEqual(['ai_check.completed', 'scan.completed']);
  });

  it('accepts a url of exactly 500 characters and stores it whole', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const url = `https://hooks.example.com/${'a'.repeat(500 - 'https://hooks.example.com/'.length)}`;
    expect(url).toHaveLength(500);

    const res = await post(key).send({ url, events: ['*'] });

    expect(res.status).toBe(201);
    expect((await storedSubscriptions(accountId))[0].url).toBe(url);
  });

  it('ignores unknown extra fields', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await post(key).send({ url: HOOK_URL, events: ['*'], secret: 'mine', status: 'disabled' });

    expect(res.status).toBe(201);
    const [row] = await storedSubscriptions(accountId);
    expect(row.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(row.status).toBe('active');
  });

  it('reads a JSON body sent without a JSON Content-Type', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await post(key).set('Content-Type', 'text/plain').send(JSON.stringify({ url: HOOK_URL, events: ['*'] }));

    expect(res.status).toBe(201);
    expect(await storedSubscriptions(accountId)).toHaveLength(1);
  });

  describe('rejects a bad url with 400 invalid_url and stores nothing', () => {
    it.each([
      ['a missing url', { events: ['*'] }],
      ['a null url', { url: null, events: ['*'] }],
      ['an http:// url', { url: 'http://hooks.example.com/in', events: ['*'] }],
      ['an ftp:// url', { url: 'ftp://hooks.example.com/in', events: ['*'] }],
      ['a number', { url: 443, events: ['*'] }],
      ['an object', { url: { href: HOOK_URL }, events: ['*'] }],
      ['an array of urls', { url: [HOOK_URL], events: ['*'] }],
      ['a url of 501 characters', { url: `https://hooks.example.com/${'a'.repeat(475)}`, events: ['*'] }],
      ['"https://" alone', { url: 'https://', events: ['*'] }],
      ['"not a url"', { url: 'not a url', events: ['*'] }],
      ['a scheme with no host before the path (https:///path)', { url: 'https:///path', events: ['*'] }],
      ['a backslash where the host should be', { url: 'https://\\\\evil.example/x', events: ['*'] }],
      ['a url with a space in the host', { url: 'https://hooks example.com/in', events: ['*'] }],
      ['https:// not at the start', { url: ' https://hooks.example.com/in', events: ['*'] }],
      ['an empty string', { url: '', events: ['*'] }],
      ['a NUL character in the path', { url: 'https://hooks.example.com/in\u0000x', events: ['*'] }],
      ['a control character in the path', { url: 'https://hooks.example.com/in\u0007', events: ['*'] }],
    ])('%s', async (_label, body) => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const res = await post(key).send(body);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_url', message: expect.any(String) } });
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });
  });

  describe('rejects bad events with 400 invalid_events and stores nothing', () => {
    it.each([
      ['missing events', { url: HOOK_URL }],
      ['null events', { url: HOOK_URL, events: null }],
      ['an empty list', { url: HOOK_URL, events: [] }],
      ['a single string instead of a list', { url: HOOK_URL, events: 'scan.completed' }],
      ['an object instead of a list', { url: HOOK_URL, events: { 0: 'scan.completed' } }],
      ['a number in the list', { url: HOOK_URL, events: [1] }],
      ['null in the list', { url: HOOK_URL, events: [null] }],
      ['an event type that does not exist', { url: HOOK_URL, events: ['scan.finished'] }],
      ['a known event in the wrong case', { url: HOOK_URL, events: ['Scan.Completed'] }],
      ['one good and one unknown event', { url: HOOK_URL, events: ['scan.completed', 'scan.started'] }],
      ['"*" together with a named event', { url: HOOK_URL, events: ['*', 'scan.completed'] }],
    ])('%s', async (_label, body) => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const res = await post(key).send(body);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_events', message: expect.any(String) } });
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });
  });

  describe('rejects a body that is not a JSON object with 400 invalid_body and stores nothing', () => {
    it.each([
      ['broken JSON', '{"url": "https://hooks.example.com/in", "events": ['],
      ['a JSON array', JSON.stringify([{ url: HOOK_URL, events: ['*'] }])],
      ['a JSON string', JSON.stringify('https://hooks.example.com/in')],
      ['a JSON number', '42'],
      ['JSON null', 'null'],
      ['a form-encoded body', 'url=https%3A%2F%2Fhooks.example.com&events=*'],
    ])('%s', async (_label, raw) => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const res = await post(key).set('Content-Type', 'application/json').send(raw);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_body', message: expect.any(String) } });
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });

    it('an empty body', async () => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const res = await post(key).set('Content-Type', 'application/json');

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_body', message: expect.any(String) } });
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });

    it('an unsupported charset', async () => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const res = await post(key)
        .set('Content-Type', 'application/json; charset=klingon')
        .send(JSON.stringify({ url: HOOK_URL, events: ['*'] }));

      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });
  });

  describe('compressed bodies', () => {
    it('reads a gzip-encoded body', async () => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const call = post(key).set('Content-Type', 'application/json').set('Content-Encoding', 'gzip');
      call.write(gzipSync(JSON.stringify({ url: HOOK_URL, events: ['*'] })));
      const res = await call;

      expect(res.status).toBe(201);
      expect(await storedSubscriptions(accountId)).toHaveLength(1);
    });

    it.each([
      ['bytes that are not gzip at all', Buffer.from('{"url": "https://hooks.example.com/in", "events": ["*"]}')],
      ['a truncated gzip stream', gzipSync(JSON.stringify({ url: HOOK_URL, events: ['*'] })).subarray(0, 20)],
    ])('rejects %s under Content-Encoding: gzip with 400 invalid_body, not a 5xx, and stores nothing', async (_label, bytes) => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const call = post(key).set('Content-Type', 'application/json').set('Content-Encoding', 'gzip');
      call.write(bytes);
      const res = await call;

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_body', message: expect.any(String) } });
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });

    it('refuses a small gzip body that inflates past the limit with 413 and stores nothing', async () => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
      const bomb = gzipSync(JSON.stringify({ url: HOOK_URL, events: ['*'], padding: 'x'.repeat(3 * 1024 * 1024) }));
      expect(bomb.length).toBeLessThan(16 * 1024);

      const call = post(key).set('Content-Type', 'application/json').set('Content-Encoding', 'gzip');
      call.write(bomb);
      const res = await call;

      expect(res.status).toBe(413);
      expect(res.body.error.code).toBe('payload_too_large');
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });

    it('rejects an unsupported Content-Encoding with invalid_body', async () => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const res = await post(key)
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'compress')
        .send(JSON.stringify({ url: HOOK_URL, events: ['*'] }));

      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });
  });

  describe('prototype keys in the body', () => {
    it('does not read url or events through __proto__ and answers 400 without polluting Object.prototype', async () => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const res = await post(key)
        .set('Content-Type', 'application/json')
        .send('{"__proto__": {"url": "https://x.example/hook", "events": ["*"], "polluted": true}}');

      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_url');
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(({} as Record<string, unknown>).url).toBeUndefined();
      expect(await storedSubscriptions(accountId)).toEqual([]);
    });

    it('creates normally from the own fields when __proto__ and constructor keys ride along', async () => {
      const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

      const res = await post(key)
        .set('Content-Type', 'application/json')
        .send(
          '{"__proto__": {"url": "https://evil.example/hook", "polluted": true},' +
            ' "constructor": {"prototype": {"polluted": true}},' +
            ` "url": "${HOOK_URL}", "events": ["scan.completed"]}`,
        );

      expect(res.status).toBe(201);
      expect(res.body.data.subscription).toMatchObject({ url: HOOK_URL, events: ['scan.completed'] });
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      const rows = await storedSubscriptions(accountId);
      expect(rows.map((row) => [row.url, row.events])).toEqual([[HOOK_URL, ['scan.completed']]]);
    });
  });

  it('answers a 20,000-character url with invalid_url, not with the size limit', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await post(key).send({ url: `https://hooks.example.com/${'a'.repeat(20_000)}`, events: ['*'] });

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_url');
    expect(await api.db('webhook_subscriptions').where({ account_id: accountId })).toHaveLength(0);
  });

  it('refuses a 2 MB body with 413 payload_too_large in the envelope and stores nothing', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await post(key).send({ url: HOOK_URL, events: ['*'], padding: 'x'.repeat(2 * 1024 * 1024) });

    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: { code: 'payload_too_large', message: expect.any(String) } });
    expect(await storedSubscriptions(accountId)).toEqual([]);
  });

  it('refuses a 2 MB body sent chunked, without Content-Length, with 413 and stores nothing', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const body = JSON.stringify({ url: HOOK_URL, events: ['*'], padding: 'x'.repeat(2 * 1024 * 1024) });

    const call = post(key).set('Content-Type', 'application/json');
    for (let at = 0; at < body.length; at += 16 * 1024) call.write(body.slice(at, at + 16 * 1024));
    const res = await call;

    expect(sentHeader(res, 'content-length')).toBeUndefined();
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: { code: 'payload_too_large', message: expect.any(String) } });
    expect(await storedSubscriptions(accountId)).toEqual([]);
  });

  it('accepts a small body sent chunked, without Content-Length', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const call = post(key).set('Content-Type', 'application/json');
    call.write(JSON.stringify({ url: HOOK_URL, events: ['*'] }));
    const res = await call;

    expect(sentHeader(res, 'content-length')).toBeUndefined();
    expect(res.status).toBe(201);
    expect(await storedSubscriptions(accountId)).toHaveLength(1);
  });
});

describe('GET /api/v1/webhooks', () => {
  it('lists the account’s subscriptions newest first, with delivery health and never the secret', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:webhooks', 'write:webhooks']);
    const older = (await post(key).send({ url: 'https://one.example/in', events: ['scan.completed'] })).body.data.subscription;
    await databaseClockPast(new Date(older.createdAt));
    const newer = (await post(key).send({ url: 'https://two.example/in', events: ['*'] })).body.data.subscription;

    const res = await request(api.app).get('/api/v1/webhooks').set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: {
        subscriptions: [
          {
            id: newer.id,
            url: 'https://two.example/in',
            events: ['*'],
            createdAt: newer.createdAt,
            lastDeliveryAt: null,
            failureCount: 0,
            status: 'active',
          },
          {
            id: older.id,
            url: 'https://one.example/in',
            events: ['scan.completed'],
            createdAt: older.createdAt,
            lastDeliveryAt: null,
            failureCount: 0,
            status: 'active',
          },
        ],
      },
    });
    for (const listed of res.body.data.subscriptions) expect(listed).not.toHaveProperty('secret');
    expect(res.text).not.toContain(older.secret);
    expect(res.text).not.toContain(newer.secret);
    expect(res.text).not.toMatch(/secret/i);
    expect(await storedSubscriptions(accountId)).toHaveLength(2);
  });

  it('answers an empty list for an account without subscriptions', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);

    const res = await request(api.app).get('/api/v1/webhooks').set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { subscriptions: [] } });
  });

  it('never shows another account’s subscriptions', async () => {
    const mine = await seedAccount(api.db, ['read:webhooks']);
    const theirs = await seedAccount(api.db, ['read:webhooks']);
    await createSubscription(api.db, theirs.accountId, { url: HOOK_URL, events: ['*'] });

    const res = await request(api.app).get('/api/v1/webhooks').set(bearer(mine.key));

    expect(res.body).toEqual({ data: { subscriptions: [] } });
  });

  it('keeps an auto-disabled subscription listed with its failureCount and last delivery time', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:webhooks']);
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    const lastDeliveryAt = new Date('2026-03-01T12:34:56.789Z');
    await api.db('webhook_subscriptions')
      .where({ id: sub.id })
      .update({ status: 'disabled', failure_count: 100, disabled_at: api.db.fn.now(3), last_delivery_at: lastDeliveryAt });

    const res = await request(api.app).get('/api/v1/webhooks').set(bearer(key));

    expect(res.body.data.subscriptions).toEqual([
      {
        id: sub.id,
        url: HOOK_URL,
        events: ['*'],
        createdAt: sub.createdAt.toISOString(),
        lastDeliveryAt: '2026-03-01T12:34:56.789Z',
        failureCount: 100,
        status: 'disabled',
      },
    ]);
    expect(res.text).not.toContain(sub.secret);
  });
});

describe('DELETE /api/v1/webhooks/{subscriptionId}', () => {
  it('revokes the subscription: 200 {deleted, id}, the row is gone and the list no longer shows it', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:webhooks', 'write:webhooks']);
    const kept = await createSubscription(api.db, accountId, { url: 'https://kept.example/in', events: ['*'] });
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });

    const res = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(key));
    const list = await request(api.app).get('/api/v1/webhooks').set(bearer(key));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { deleted: true, id: sub.id } });
    expect(await api.db('webhook_subscriptions').where({ id: sub.id })).toEqual([]);
    expect((await storedSubscriptions(accountId)).map((row) => row.id)).toEqual([kept.id]);
    expect(list.body.data.subscriptions.map((listed: { id: string }) => listed.id)).toEqual([kept.id]);
  });

  it('answers 404 not_found when the same subscription is deleted again', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });

    const first = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(key));
    const again = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(key));

    expect(first.status).toBe(200);
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
  });

  it('answers 404 not_found for another account’s subscription, exactly as for an unknown id, and leaves it untouched', async () => {
    const mine = await seedAccount(api.db, ['write:webhooks']);
    const theirs = await seedAccount(api.db, ['read:webhooks']);
    const sub = await createSubscription(api.db, theirs.accountId, { url: HOOK_URL, events: ['*'] });
    const before = await api.db('webhook_subscriptions').where({ id: sub.id }).first();

    const foreign = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(mine.key));
    const unknown = await request(api.app).delete(`/api/v1/webhooks/${newId('wh')}`).set(bearer(mine.key));

    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual(foreign.body);
    expect(await api.db('webhook_subscriptions').where({ id: sub.id }).first()).toEqual(before);
    const theirList = await request(api.app).get('/api/v1/webhooks').set(bearer(theirs.key));
    expect(theirList.body.data.subscriptions.map((listed: { id: string }) => listed.id)).toEqual([sub.id]);
  });

  it('answers 404 not_found for an id that is not even shaped like one', async () => {
    const { key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await request(api.app).delete(`/api/v1/webhooks/${encodeURIComponent("x' OR '1'='1")}`).set(bearer(key));

    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });

  it('answers 404 not_found for an id holding a NUL byte, which no stored id can contain', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });

    const res = await request(api.app).delete(`/api/v1/webhooks/${sub.id}%00`).set(bearer(key));

    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    expect((await storedSubscriptions(accountId)).map((row) => [row.id, row.status])).toEqual([[sub.id, 'active']]);
  });

  it('revokes an auto-disabled subscription too', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    await api.db('webhook_subscriptions').where({ id: sub.id }).update({ status: 'disabled', failure_count: 100 });

    const res = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(key));

    expect(res.status).toBe(200);
    expect(await storedSubscriptions(accountId)).toEqual([]);
  });

  it('deletes the delivery history and cancels the retries still queued, keeping the events', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    const eventId = newId('evt');
    const earlierEventId = newId('evt');
    await api.db('events').insert([
      { id: eventId, account_id: accountId, type: 'scan.completed', body: '{}' },
      { id: earlierEventId, account_id: accountId, type: 'scan.completed', body: '{}' },
    ]);
    const pendingId = newId('dlv');
    const deliveredId = newId('dlv');
    await api.db('deliveries').insert([
      {
        id: pendingId,
        event_id: eventId,
        subscription_id: sub.id,
        status: 'pending',
        attempt_count: 1,
        next_attempt_at: api.db.raw(`now() + interval '1 minute'`),
      },
      { id: deliveredId, event_id: earlierEventId, subscription_id: sub.id, status: 'delivered', attempt_count: 1 },
    ]);
    await api.db('delivery_attempts').insert({ delivery_id: pendingId, n: 1, at: new Date(), status_code: 500, duration_ms: 12 });
    await enqueueDeliveries(api.queues, [{ deliveryId: pendingId, subscriptionId: sub.id, attempt: 2, delayMs: 60_000 }]);
    expect(await api.queues.deliveries[0]!.getJob(deliveryJobId(pendingId, 2))).toBeDefined();

    const res = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(key));

    expect(res.status).toBe(200);
    expect(await api.db('deliveries').whereIn('id', [pendingId, deliveredId])).toEqual([]);
    expect(await api.db('delivery_attempts').where({ delivery_id: pendingId })).toEqual([]);
    expect(await api.queues.deliveries[0]!.getJob(deliveryJobId(pendingId, 2))).toBeUndefined();
    expect(await api.db('events').whereIn('id', [eventId, earlierEventId])).toHaveLength(2);
  });
});
