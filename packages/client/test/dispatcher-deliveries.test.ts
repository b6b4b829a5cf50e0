import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import { Webhook } from 'standardwebhooks';
import { createWebhookHandler, SiteVisibilityClient, verifyWebhookDelivery, WebhookVerificationError, type WebhookEvent, type WebhookSecrets } from '../src/index.js';
import { completeScan, deployPowerUp } from '@svc/core';
import { createApiKey } from '@svc/core/operator';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from '@svc/dispatcher/test-support';
import { startApi, type ListeningApi } from './support.js';

/** What the customer's receiver saw: the raw request, and what the library's handler passed on. */
interface Seen {
  raw: Array<{ body: Buffer; headers: Record<string, string | string[] | undefined> }>;
  events: Array<{ event: WebhookEvent; deliveryId: string | null }>;
  answers: number[];
}

let h: Harness;
let api: ListeningApi;
let server: Server;
let port = 0;
const secrets = new Map<string, WebhookSecrets>();
const seen = new Map<string, Seen>();

const handlers = new Map<string, ReturnType<typeof createWebhookHandler>>();

/** One handler per endpoint, made once, as a customer's server makes it at start. */
function handlerFor(path: string, entry: Seen) {
  let handler = handlers.get(path);
  if (!handler) {
    handler = createWebhookHandler({
      secret: secrets.get(path) ?? 'unknown',
      onEvent: (event, context) => {
        entry.events.push({ event, ...context });
      },
    });
    handlers.set(path, handler);
  }
  return handler;
}

function seenBy(path: string): Seen {
  let entry = seen.get(path);
  if (!entry) {
    entry = { raw: [], events: [], answers: [] };
    seen.set(path, entry);
  }
  return entry;
}

beforeAll(async () => {
  h = await createHarness();
  // A customer's Express receiver, as the client library's README shows it, over HTTPS.
  const app = express();
  app.post('/hooks/:name', express.raw({ type: 'application/json' }), (req, res, next) => {
    const path = `/hooks/${req.params.name}`;
    const entry = seenBy(path);
    entry.raw.push({ body: req.body as Buffer, headers: { ...req.headers } });
    res.on('finish', () => entry.answers.push(res.statusCode));
    handlerFor(path, entry)(req, res);
    void next;
  });
  server = createServer({ cert: h.certificate.cert, key: h.certificate.key }, app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  h.startDispatcher();
  api = await startApi({ DATABASE_URL: h.config.databaseUrl, QUEUE_PREFIX: h.config.queuePrefix, RATE_LIMIT_PER_MINUTE: '100000' });
});
afterAll(async () => {
  await api.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await h.close();
});

async function subscribe(name: string, events: string[] = ['*']) {
  const tenant = await seedTenant(h);
  const path = `/hooks/${name}`;
  const { createSubscription } = await import('@svc/core/operator');
  const sub = await createSubscription(h.db, tenant.accountId, { url: `https://127.0.0.1:${port}${path}`, events });
  secrets.set(path, sub.secret);
  return { tenant, path, sub };
}

describe('the client library verifying real deliveries of a real dispatcher', () => {
  it('verifies a scan.completed delivery and passes the typed event on once, with its delivery id', async () => {
    const { tenant, path } = await subscribe('scan');
    const scan = await tenant.newScan();

    const { eventId } = await completeScan({ db: h.db, queues: h.queues }, { scanId: scan.id, score: 77.25 });
    await waitFor(() => seenBy(path).events.length >= 1, 15_000, 'the handler to pass the event on');

    const delivery = await h.db('deliveries').where({ event_id: eventId }).first();
    const entry = seenBy(path);
    expect(entry.answers).toEqual([204]);
    // The Standard Webhooks headers were there, so their signature and timestamp were checked too.
    expect(entry.raw[0]!.headers).toMatchObject({ 'webhook-id': delivery.id, 'webhook-signature': expect.stringMatching(/^v1,/) });
    expect(entry.events).toEqual([
      {
        deliveryId: delivery.id,
        event: { event: 'scan.completed', timestamp: expect.any(String), data: { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 77.25 } },
      },
    ]);
    const settled = await waitFor(async () => (await h.db('deliveries').where({ id: delivery.id }).first()).status === 'delivered', 10_000, 'delivered');
    expect(settled).toBe(true);
  });

  it('answers a replayed delivery 204 without passing it on twice, and refuses a tampered or timestamp-stripped one with 400', async () => {
    const { tenant, path, sub } = await subscribe('replay', ['power_up.deployed']);
    await deployPowerUp({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, powerUpId: 'pu_schema' });
    await waitFor(() => seenBy(path).events.length >= 1, 15_000, 'the first delivery');
    const [original] = seenBy(path).raw;
    const headers = Object.fromEntries(
      Object.entries(original!.headers).filter(([name]) => name === 'content-type' || name.startsWith('x-service-') || name.startsWith('webhook-')),
    ) as Record<string, string>;

    const replay = await fetchInsecure(`https://127.0.0.1:${port}${path}`, original!.body, headers);
    const tampered = await fetchInsecure(`https://127.0.0.1:${port}${path}`, Buffer.from(original!.body.toString().replace('pu_schema', 'pu_other')), headers);
    const stripped = await fetchInsecure(
      `https://127.0.0.1:${port}${path}`,
      original!.body,
      Object.fromEntries(Object.entries(headers).filter(([name]) => !name.startsWith('webhook-'))),
    );

    expect(replay).toBe(204);
    expect(tampered).toBe(400);
    expect(stripped).toBe(400); // a capture without its timestamp headers could be replayed forever
    expect(seenBy(path).events).toHaveLength(1);
    expect((await verifyWebhookDelivery(original!.body, original!.headers, sub.secret)).event.event).toBe('power_up.deployed');
    // The same capture, replayed after the tolerance, is refused on its timestamp.
    const later = () => new Date(Number(original!.headers['webhook-timestamp']) * 1000 + 301_000);
    await expect(verifyWebhookDelivery(original!.body, original!.headers, sub.secret, { now: later })).rejects.toThrow('more than 300 s old');
  });
});

describe('a secret rotation, verified by the client library on real deliveries', () => {
  /** The reason a delivery is refused with these secrets, or 'verified'. */
  async function verdict(raw: { body: Buffer; headers: Record<string, string | string[] | undefined> }, secretList: string[]): Promise<string> {
    try {
      await verifyWebhookDelivery(raw.body, raw.headers, secretList);
      return 'verified';
    } catch (error) {
      if (error instanceof WebhookVerificationError) return error.reason;
      throw error;
    }
  }
  const WRONG = 'f'.repeat(64);

  it('accepts every attempt of the overlap with [old, new], refuses them with only a wrong secret, and a Standard Webhooks library holding either secret verifies them', async () => {
    const { tenant, path, sub } = await subscribe('rotation', ['scan.completed']);
    const { key } = await createApiKey(h.db, tenant.accountId, { name: `rotation ${uniqueTag()}`, scopes: ['write:webhooks'] });
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl });

    const rotated = await client.webhooks.rotateSecret(sub.id, { overlapSeconds: 3600 });
    // The receiver is redeployed with both secrets, as the rotation guide says.
    secrets.set(path, [sub.secret, rotated.secret]);
    await completeScan({ db: h.db, queues: h.queues }, { scanId: (await tenant.newScan()).id, score: 50 });
    await waitFor(() => seenBy(path).events.length >= 1, 15_000, 'the delivery signed during the overlap');
    const [during] = seenBy(path).raw;
    // Signed with both secrets (the new first), X-Service-Signature with the new one only.
    const signatures = String(during!.headers['webhook-signature']).split(' ');
    const receivedWith = { 'webhook-id': String(during!.headers['webhook-id']), 'webhook-timestamp': String(during!.headers['webhook-timestamp']) };

    expect(seenBy(path).answers).toEqual([204]);
    expect(signatures).toHaveLength(2);
    expect(await verdict(during!, [sub.secret, rotated.secret])).toBe('verified');
    expect(await verdict(during!, [rotated.secret])).toBe('verified');
    expect(await verdict(during!, [WRONG])).toBe('invalid_signature');
    expect(await verdict(during!, [sub.secret])).toBe('invalid_signature');
    // A Standard Webhooks receiver that still holds the old whsec_ secret, or already the new one, accepts it.
    for (const whsec of [`whsec_${Buffer.from(sub.secret).toString('base64')}`, rotated.standardWebhooksSecret]) {
      expect(new Webhook(whsec).verify(during!.body, { ...receivedWith, 'webhook-signature': signatures.join(' ') })).toMatchObject({ event: 'scan.completed' });
    }
    // The same delivery sent to a receiver holding only a wrong secret is refused with 400.
    const wrongPath = `/hooks/rotation-wrong-${uniqueTag()}`;
    secrets.set(wrongPath, [WRONG]);
    const headers = Object.fromEntries(Object.entries(during!.headers).filter(([name]) => name === 'content-type' || name.startsWith('x-service-') || name.startsWith('webhook-'))) as Record<string, string>;
    expect(await fetchInsecure(`https://127.0.0.1:${port}${wrongPath}`, during!.body, headers)).toBe(400);
    expect(seenBy(wrongPath).events).toEqual([]);
  });

  it('after a rotation without overlap, each attempt carries the new secret’s signature alone: [old, new] still accepts it, the old secret alone does not', async () => {
    const { tenant, path, sub } = await subscribe('rotation-now', ['scan.completed']);
    const { key } = await createApiKey(h.db, tenant.accountId, { name: `rotation ${uniqueTag()}`, scopes: ['write:webhooks'] });
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl });

    const rotated = await client.webhooks.rotateSecret(sub.id, { overlapSeconds: 0 });
    secrets.set(path, [sub.secret, rotated.secret]);
    await completeScan({ db: h.db, queues: h.queues }, { scanId: (await tenant.newScan()).id, score: 51 });
    await waitFor(() => seenBy(path).events.length >= 1, 15_000, 'the delivery after the rotation');
    const [after] = seenBy(path).raw;

    expect(rotated.previousSecretExpiresAt).toBeNull();
    expect(String(after!.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(seenBy(path).answers).toEqual([204]);
    expect(await verdict(after!, [sub.secret, rotated.secret])).toBe('verified');
    expect(await verdict(after!, [sub.secret])).toBe('invalid_signature');
    expect(() => new Webhook(`whsec_${Buffer.from(sub.secret).toString('base64')}`).verify(after!.body, after!.headers as Record<string, string>)).toThrow();
  });
});

/** POSTs to the local HTTPS receiver, trusting its test certificate. */
async function fetchInsecure(url: string, body: Buffer, headers: Record<string, string>): Promise<number> {
  const { request } = await import('node:https');
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) }, ca: h.certificate.cert }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}
