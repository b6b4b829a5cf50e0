import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId, signStandardWebhook } from '@svc/core';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { waitForDelivery, type Harness, type ReceivedRequest } from '@svc/dispatcher/test-support';
import { startStage, stopStage, fireEvent, ISO_8601, tenantWithKey } from './delivery-stories.js';
import { dbNow, serviceVerifies, signaturesOf, standardSecret, standardVerifies, write } from './self-service-stories.js';
import type { TestApi } from './support.js';

let h: Harness;
let api: TestApi;

// The harness's fast schedule: all 7 attempts within a second or two.
beforeAll(async () => ({ h, api } = await startStage()));
afterAll(() => stopStage({ h, api }));

const rotatePath = (subscriptionId: string) => `/api/v1/webhooks/${subscriptionId}/rotate-secret`;
const DAY_MS = 86_400_000;

async function secretsOf(subscriptionId: string) {
  return h.db('webhook_subscriptions').where({ id: subscriptionId }).first('secret', 'previous_secret', 'previous_secret_expires_at', 'status');
}

/** Fires one event for the tenant's site and waits until its delivery to the subscription is delivered; returns what the receiver got for it. */
async function deliverEvent(siteId: string, subscriptionId: string, path: string): Promise<ReceivedRequest[]> {
  const eventId = await fireEvent(h, siteId);
  const row = await waitForDelivery(h, eventId, subscriptionId, (r) => r.status === 'delivered', 'the delivery to be delivered', 20_000);
  return h.receiver.to(path).filter((r) => r.headers['x-service-delivery-id'] === row.id);
}

describe('POST /api/v1/webhooks/{subscriptionId}/rotate-secret', () => {
  it('answers a new secret in both forms with a day of overlap, during which receivers holding only the old or only the new secret verify every attempt; a rotation with overlap 0 then leaves only the newest', async () => {
    const t = await tenantWithKey(h);
    const path = `/flaky/3/rotation-${uniqueTag()}`;
    const sub = await t.subscribe(path);
    const before = Date.now();

    const res = await write(api, t.key).post(rotatePath(sub.id)).send({});

    const after = Date.now();
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: {
        subscription: {
          id: sub.id,
          secret: expect.stringMatching(/^[0-9a-f]{64}$/),
          standardWebhooksSecret: expect.any(String),
          previousSecretExpiresAt: expect.stringMatching(ISO_8601),
        },
      },
    });
    const rotated = res.body.data.subscription;
    expect(rotated.secret).not.toBe(sub.secret);
    expect(rotated.standardWebhooksSecret).toBe(`whsec_${Buffer.from(rotated.secret, 'utf8').toString('base64')}`);
    const expiresAt = Date.parse(rotated.previousSecretExpiresAt);
    expect(expiresAt).toBeGreaterThanOrEqual(before + DAY_MS - 50);
    expect(expiresAt).toBeLessThanOrEqual(after + DAY_MS + 50);
    const stored = await secretsOf(sub.id);
    expect(stored).toMatchObject({ secret: rotated.secret, previous_secret: sub.secret, status: 'active' });
    expect(stored.previous_secret_expires_at.toISOString()).toBe(rotated.previousSecretExpiresAt);

    // Three 503s, then a 200: four attempts, each signed anew during the overlap.
    const attempts = await deliverEvent(t.site.id, sub.id, path);

    expect(attempts).toHaveLength(4);
    for (const attempt of attempts) {
      const headers = attempt.headers as Record<string, string>;
      const signatures = signaturesOf(attempt);
      expect(signatures).toHaveLength(2);
      // New first, then the old one, each exactly what the reference signing gives.
      const timestamp = Number(headers['webhook-timestamp']);
      expect(signatures).toEqual([
        signStandardWebhook(headers['webhook-id']!, timestamp, attempt.body, rotated.secret),
        signStandardWebhook(headers['webhook-id']!, timestamp, attempt.body, sub.secret),
      ]);
      expect(standardVerifies(attempt.body, attempt.headers, sub.secret)).toBe(true);
      expect(standardVerifies(attempt.body, attempt.headers, rotated.secret)).toBe(true);
      // The standardWebhooksSecret the API answered is what such a receiver is configured with.
      expect(standardSecret(rotated.secret)).toBe(rotated.standardWebhooksSecret);
      expect(serviceVerifies(attempt.body, attempt.headers, rotated.secret)).toBe(true);
      expect(serviceVerifies(attempt.body, attempt.headers, sub.secret)).toBe(false);
    }

    const ended = await write(api, t.key).post(rotatePath(sub.id)).send({ overlapSeconds: 0 });

    expect(ended.status).toBe(200);
    const newest = ended.body.data.subscription;
    expect(newest.previousSecretExpiresAt).toBeNull();
    expect(newest.secret).not.toBe(rotated.secret);
    expect(await secretsOf(sub.id)).toMatchObject({ secret: newest.secret, previous_secret: null, previous_secret_expires_at: null });
    const later = await deliverEvent(t.site.id, sub.id, path);
    expect(later).toHaveLength(4);
    for (const attempt of later) {
      expect(signaturesOf(attempt)).toHaveLength(1);
      expect(standardVerifies(attempt.body, attempt.headers, newest.secret)).toBe(true);
      expect(standardVerifies(attempt.body, attempt.headers, rotated.secret)).toBe(false);
      expect(standardVerifies(attempt.body, attempt.headers, sub.secret)).toBe(false);
      expect(serviceVerifies(attempt.body, attempt.headers, newest.secret)).toBe(true);
      expect(serviceVerifies(attempt.body, attempt.headers, rotated.secret)).toBe(false);
    }
  });

  it('stops signing with the old secret once a 2-second overlap is over: later attempts verify with the new secret only', async () => {
    const t = await tenantWithKey(h);
    const path = `/ok/short-overlap-${uniqueTag()}`;
    const sub = await t.subscribe(path);

    const res = await write(api, t.key).post(rotatePath(sub.id)).send({ overlapSeconds: 2 });

    expect(res.status).toBe(200);
    const rotated = res.body.data.subscription;
    const stored = await secretsOf(sub.id);
    expect(stored.previous_secret).toBe(sub.secret);
    expect(stored.previous_secret_expires_at.toISOString()).toBe(rotated.previousSecretExpiresAt);
    // The overlap ends on Postgres's clock, which the claim reads.
    await waitFor(async () => (await dbNow(h.db)) > stored.previous_secret_expires_at, 5_000, 'the overlap to end');

    const [attempt, ...more] = await deliverEvent(t.site.id, sub.id, path);

    expect(more).toEqual([]);
    expect(signaturesOf(attempt!)).toHaveLength(1);
    expect(standardVerifies(attempt!.body, attempt!.headers, rotated.secret)).toBe(true);
    expect(standardVerifies(attempt!.body, attempt!.headers, sub.secret)).toBe(false);
    expect(serviceVerifies(attempt!.body, attempt!.headers, rotated.secret)).toBe(true);
    expect(serviceVerifies(attempt!.body, attempt!.headers, sub.secret)).toBe(false);
  });

  it('ends the older overlap when rotated again during one: the newest two secrets verify, the oldest no longer does', async () => {
    const t = await tenantWithKey(h);
    const path = `/ok/rotate-twice-${uniqueTag()}`;
    const sub = await t.subscribe(path);

    const first = await write(api, t.key).post(rotatePath(sub.id)).send({ overlapSeconds: 3600 });
    const second = await write(api, t.key).post(rotatePath(sub.id)).send({ overlapSeconds: 3600 });

    expect([first.status, second.status]).toEqual([200, 200]);
    const middle = first.body.data.subscription.secret as string;
    const newest = second.body.data.subscription.secret as string;
    expect(new Set([sub.secret, middle, newest]).size).toBe(3);
    expect(await secretsOf(sub.id)).toMatchObject({ secret: newest, previous_secret: middle });
    const [attempt, ...more] = await deliverEvent(t.site.id, sub.id, path);

    expect(more).toEqual([]);
    expect(signaturesOf(attempt!)).toHaveLength(2);
    expect(standardVerifies(attempt!.body, attempt!.headers, newest)).toBe(true);
    expect(standardVerifies(attempt!.body, attempt!.headers, middle)).toBe(true);
    expect(standardVerifies(attempt!.body, attempt!.headers, sub.secret)).toBe(false);
    expect(serviceVerifies(attempt!.body, attempt!.headers, newest)).toBe(true);
    expect(serviceVerifies(attempt!.body, attempt!.headers, middle)).toBe(false);
  });

  it('loses no delivery when rotated while attempts are on the wire: a receiver keeping the old secret and one switching to the new one both end with every delivery, and every attempt verifies with one of the two', async () => {
    const t = await tenantWithKey(h);
    const tag = uniqueTag();
    const oldPath = `/keeps-old/${tag}`;
    const newPath = `/switches-to-new/${tag}`;
    const oldSub = await t.subscribe(oldPath);
    const newSub = await t.subscribe(newPath);
    // What each receiver holds: one keeps the secret it had; the other switches to the new one as soon as the rotation answers.
    let switchedSecret: string | undefined;
    const answered: { path: string; deliveryId: string; status: number; signatures: number }[] = [];
    const receiver = (path: string, held: () => string) => (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
      // Slow enough that attempts signed before the rotation are still on the wire after it.
      setTimeout(() => {
        const status = standardVerifies(body, req.headers, held()) ? 200 : 401;
        answered.push({ path, deliveryId: String(req.headers['webhook-id']), status, signatures: String(req.headers['webhook-signature']).split(' ').length });
        res.writeHead(status).end();
      }, 300);
    };
    h.receiver.handle(oldPath, receiver(oldPath, () => oldSub.secret));
    h.receiver.handle(newPath, receiver(newPath, () => switchedSecret ?? newSub.secret));

    const before = await Promise.all(Array.from({ length: 5 }, () => fireEvent(h, t.site.id)));
    await waitFor(() => h.receiver.to(oldPath).length >= 1 && h.receiver.to(newPath).length >= 1, 10_000, 'attempts on the wire at both receivers');
    const [rotatedOld, rotatedNew] = await Promise.all([
      write(api, t.key).post(rotatePath(oldSub.id)).send({}),
      write(api, t.key).post(rotatePath(newSub.id)).send({}),
    ]);
    switchedSecret = rotatedNew.body.data.subscription.secret;
    const afterwards = await Promise.all(Array.from({ length: 5 }, () => fireEvent(h, t.site.id)));
    const eventIds = [...before, ...afterwards];
    const rows = await waitFor(
      async () => {
        const found = await h.db('deliveries').whereIn('subscription_id', [oldSub.id, newSub.id]).whereIn('event_id', eventIds);
        return found.length === 20 && found.every((row) => row.status !== 'pending') && found;
      },
      20_000,
      'every delivery to both receivers to finish',
    );

    expect([rotatedOld.status, rotatedNew.status]).toEqual([200, 200]);
    expect(rows.map((row) => row.status)).toEqual(Array(20).fill('delivered'));
    const secrets = {
      [oldPath]: [oldSub.secret, rotatedOld.body.data.subscription.secret as string],
      [newPath]: [newSub.secret, switchedSecret!],
    };
    for (const path of [oldPath, newPath]) {
      for (const attempt of h.receiver.to(path)) {
        const [previous, current] = secrets[path]!;
        expect(standardVerifies(attempt.body, attempt.headers, previous!) || standardVerifies(attempt.body, attempt.headers, current!)).toBe(true);
        expect(serviceVerifies(attempt.body, attempt.headers, previous!) || serviceVerifies(attempt.body, attempt.headers, current!)).toBe(true);
      }
    }
    // The receiver keeping the old secret accepted every attempt: one per delivery.
    const atOld = answered.filter((a) => a.path === oldPath);
    expect(atOld.map((a) => a.status)).toEqual(Array(10).fill(200));
    // The switching one refused only attempts signed before the rotation (one signature), and took each delivery's next attempt.
    const atNew = answered.filter((a) => a.path === newPath);
    const refused = atNew.filter((a) => a.status === 401);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.every((a) => a.signatures === 1)).toBe(true);
    expect(atNew.filter((a) => a.status === 200)).toHaveLength(10);
    expect(new Set(atNew.filter((a) => a.status === 200).map((a) => a.deliveryId)).size).toBe(10);
  });

  it('answers 404 for another account’s subscription, exactly as for an unknown id, and changes nothing', async () => {
    const owner = await tenantWithKey(h);
    const stranger = await tenantWithKey(h);
    const path = `/ok/not-yours-${uniqueTag()}`;
    const sub = await owner.subscribe(path);
    const before = await secretsOf(sub.id);

    const foreign = await write(api, stranger.key).post(rotatePath(sub.id)).send({ overlapSeconds: 60 });
    const unknown = await write(api, stranger.key).post(rotatePath(newId('wh'))).send({ overlapSeconds: 60 });

    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual(foreign.body);
    expect(await secretsOf(sub.id)).toEqual(before);
    expect(before).toMatchObject({ secret: sub.secret, previous_secret: null, previous_secret_expires_at: null });
    const [attempt] = await deliverEvent(owner.site.id, sub.id, path);
    expect(signaturesOf(attempt!)).toHaveLength(1);
    expect(standardVerifies(attempt!.body, attempt!.headers, sub.secret)).toBe(true);
  });

  it('defaults to a day of overlap without a body, and takes the bounds 0 and 604800 (7 days)', async () => {
    const t = await tenantWithKey(h);
    const [a, b, c] = await Promise.all([t.subscribe('/ok/default-a'), t.subscribe('/ok/default-b'), t.subscribe('/ok/default-c')]);
    const started = Date.now();

    const none = await write(api, t.key).post(rotatePath(a.id));
    const week = await write(api, t.key).post(rotatePath(b.id)).send({ overlapSeconds: 604_800 });
    const zero = await write(api, t.key).post(rotatePath(c.id)).send({ overlapSeconds: 0 });

    const ended = Date.now();
    expect([none.status, week.status, zero.status]).toEqual([200, 200, 200]);
    const inRange = (iso: string, ms: number) => Date.parse(iso) >= started + ms - 50 && Date.parse(iso) <= ended + ms + 50;
    expect(inRange(none.body.data.subscription.previousSecretExpiresAt, DAY_MS)).toBe(true);
    expect(inRange(week.body.data.subscription.previousSecretExpiresAt, 7 * DAY_MS)).toBe(true);
    expect(zero.body.data.subscription.previousSecretExpiresAt).toBeNull();
    expect(await secretsOf(a.id)).toMatchObject({ secret: none.body.data.subscription.secret, previous_secret: a.secret });
    expect(await secretsOf(b.id)).toMatchObject({ secret: week.body.data.subscription.secret, previous_secret: b.secret });
    expect(await secretsOf(c.id)).toMatchObject({ secret: zero.body.data.subscription.secret, previous_secret: null, previous_secret_expires_at: null });
  });

  describe('refuses an overlapSeconds out of range or not a whole number with 400 invalid_body, and changes nothing', () => {
    it.each([
      ['negative', { overlapSeconds: -1 }],
      ['over 7 days', { overlapSeconds: 604_801 }],
      ['a fraction', { overlapSeconds: 1.5 }],
      ['a numeric string', { overlapSeconds: '60' }],
      ['null', { overlapSeconds: null }],
      ['a boolean', { overlapSeconds: true }],
      ['a huge number', { overlapSeconds: 1e308 }],
    ])('%s', async (_label, body) => {
      const t = await tenantWithKey(h);
      const sub = await t.subscribe('/ok/invalid-overlap');
      const before = await secretsOf(sub.id);

      const res = await write(api, t.key).post(rotatePath(sub.id)).send(body);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_body', message: expect.any(String) } });
      expect(await secretsOf(sub.id)).toEqual(before);
    });

    it('a body that is not a JSON object', async () => {
      const t = await tenantWithKey(h);
      const sub = await t.subscribe('/ok/invalid-overlap-body');
      const before = await secretsOf(sub.id);

      const res = await write(api, t.key).post(rotatePath(sub.id)).set('Content-Type', 'application/json').send('[3600]');

      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
      expect(await secretsOf(sub.id)).toEqual(before);
    });
  });
});
