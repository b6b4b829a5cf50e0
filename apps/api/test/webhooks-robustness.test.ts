import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createSubscription, markSubscriptionDeleting } from '@svc/core/operator';
import { seedAccount } from '@svc/core/testing';
import { bearer, createTestApi, listen, rawExchange, seedLeasedDelivery, statusOf, type ListeningApi, type TestApi } from './support.js';

const HOOK_URL = 'https://hooks.example.com/incoming';

describe('POST /api/v1/webhooks with a body that decodes to nothing', () => {
  let api: TestApi;
  let http: ListeningApi;

  beforeAll(async () => {
    api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000' });
    http = await listen(api);
  });
  afterAll(async () => {
    await http.close();
    await api.close();
  });

  async function stored(accountId: string) {
    return api.db('webhook_subscriptions').where({ account_id: accountId });
  }

  it('answers an empty chunked body with 400 invalid_body, not invalid_url, and stores nothing', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const { received } = await rawExchange(http.port, (socket) => {
      socket.write(
        'POST /api/v1/webhooks HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n' +
          `Authorization: Bearer ${key}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      );
    });

    expect(statusOf(received)).toBe(400);
    expect(JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4))).toEqual({
      error: { code: 'invalid_body', message: expect.any(String) },
    });
    expect(await stored(accountId)).toEqual([]);
  });

  it('answers a gzip body that inflates to nothing with 400 invalid_body and stores nothing', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);

    const call = request(api.app)
      .post('/api/v1/webhooks')
      .set(bearer(key))
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'gzip');
    call.write(gzipSync(Buffer.alloc(0)));
    const res = await call;

    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: { code: 'invalid_body', message: expect.any(String) } });
    expect(await stored(accountId)).toEqual([]);
  });

  it('still answers an empty JSON object {} with invalid_url: the body is there, the url is not', async () => {
    const { key } = await seedAccount(api.db, ['write:webhooks']);

    const res = await request(api.app).post('/api/v1/webhooks').set(bearer(key)).send({});

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_url');
  });
});

describe('DELETE /api/v1/webhooks/:id and an attempt on the wire', () => {
  // This API process is configured with a far shorter WEBHOOK_TIMEOUT_MS than the dispatcher
  // that holds the attempt: only the lease the dispatcher recorded says how long it may last.
  let api: TestApi;

  beforeAll(() => {
    api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1000', WEBHOOK_TIMEOUT_MS: '1' });
  });
  afterAll(async () => {
    await api.close();
  });

  async function subscriptionWithLease(accountId: string, leaseMs: number) {
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    return { sub, deliveryId: await seedLeasedDelivery(api.db, accountId, sub.id, leaseMs) };
  }

  it('answers only once the lease the dispatcher recorded has passed, whatever its own timeout setting', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    // Longer than this process's own bound would be (1 ms + the 5 s lease margin + 1 s).
    const { sub, deliveryId } = await subscriptionWithLease(accountId, 7_500);
    const { rows } = await api.db.raw('SELECT locked_until FROM deliveries WHERE id = ?', [deliveryId]);
    const leaseEnd: Date = rows[0].locked_until;

    const res = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(key));
    const { rows: after } = await api.db.raw('SELECT clock_timestamp() AS now');

    expect(res.status).toBe(200);
    expect((after[0].now as Date).getTime()).toBeGreaterThanOrEqual(leaseEnd.getTime());
    expect(await api.db('webhook_subscriptions').where({ id: sub.id })).toEqual([]);
    expect(await api.db('deliveries').where({ id: deliveryId })).toEqual([]);
  }, 30_000);

  it('lets a DELETE retried after a failed one finish the revocation and answer 200, not 404', async () => {
    const { accountId, key } = await seedAccount(api.db, ['write:webhooks']);
    const sub = await createSubscription(api.db, accountId, { url: HOOK_URL, events: ['*'] });
    // What a first DELETE that failed half-way (a 5xx after hiding the subscription) leaves behind.
    await markSubscriptionDeleting(api.db, accountId, sub.id);
    const hidden = await api.db('webhook_subscriptions').where({ id: sub.id }).first('status', 'deleting_at');
    expect(hidden.status).toBe('deleting');

    const retry = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(key));
    const again = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(key));

    expect(retry.status).toBe(200);
    expect(retry.body).toEqual({ data: { deleted: true, id: sub.id } });
    expect(await api.db('webhook_subscriptions').where({ id: sub.id })).toEqual([]);
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('not_found');
  });

  it('still answers 404 for another account’s subscription that is being deleted', async () => {
    const owner = await seedAccount(api.db, ['write:webhooks']);
    const stranger = await seedAccount(api.db, ['write:webhooks']);
    const sub = await createSubscription(api.db, owner.accountId, { url: HOOK_URL, events: ['*'] });
    await markSubscriptionDeleting(api.db, owner.accountId, sub.id);

    const res = await request(api.app).delete(`/api/v1/webhooks/${sub.id}`).set(bearer(stranger.key));

    expect(res.status).toBe(404);
    expect(await api.db('webhook_subscriptions').where({ id: sub.id })).toHaveLength(1);
  });
});
