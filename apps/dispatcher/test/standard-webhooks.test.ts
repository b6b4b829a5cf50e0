import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { verify as verifyGithubStyle } from '@octokit/webhooks-methods';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { completeAiMonitorRun, signStandardWebhook, verifySignature } from '@svc/core';
import { waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness, type ReceivedRequest } from './support/index.js';

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
  h.startDispatcher();
});
afterAll(async () => {
  await h.close();
});

/** How a receiver configures any Standard Webhooks library with the secret the create call returned. */
const standardSecret = (secret: string) => `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;

const headersOf = (request: ReceivedRequest) => request.headers as Record<string, string>;

async function deliverOne(path: string): Promise<{ secret: string; requests: ReceivedRequest[]; sentAfter: number }> {
  const tenant = await seedTenant(h);
  const sub = await tenant.subscribe(path);
  const sentAfter = Date.now();
  await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, compositeScore: 12.5 });
  const requests = await waitFor(() => h.receiver.to(path).length >= 1 && h.receiver.to(path), 10_000, 'a delivery');
  return { secret: sub.secret, requests, sentAfter };
}

describe('Standard Webhooks headers on every attempt', () => {
  it('are verified by the standardwebhooks package with whsec_ + base64 of the secret as returned, beside an unchanged v1 signature', async () => {
    const { secret, requests, sentAfter } = await deliverOne('/ok/standard');
    const [received] = requests;
    const headers = headersOf(received!);

    const payload = new Webhook(standardSecret(secret)).verify(received!.body, headers);

    expect(payload).toEqual(JSON.parse(received!.body.toString('utf8')));
    expect(headers['webhook-id']).toBe(headers['x-service-delivery-id']);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    const timestamp = Number(headers['webhook-timestamp']);
    expect(headers['webhook-timestamp']).toMatch(/^\d{10}$/);
    expect(timestamp).toBeGreaterThanOrEqual(Math.floor(sentAfter / 1000));
    expect(timestamp).toBeLessThanOrEqual(Math.ceil(received!.receivedAt / 1000));
    // The v1 header is GitHub's scheme: their own verifier accepts it, as does ours.
    expect(await verifyGithubStyle(secret, received!.body.toString('utf8'), headers['x-service-signature']!)).toBe(true);
    expect(verifySignature(received!.body, headers['x-service-signature'], secret)).toBe(true);
  });

  it('are signed anew for each retry: the same webhook-id, a fresh timestamp, each one verifying', async () => {
    const { secret } = await deliverOne('/flaky/2/standard');
    const requests = await waitFor(() => h.receiver.to('/flaky/2/standard').length === 3 && h.receiver.to('/flaky/2/standard'));
    const webhook = new Webhook(standardSecret(secret));

    for (const request of requests) expect(() => webhook.verify(request.body, headersOf(request))).not.toThrow();
    expect(new Set(requests.map((r) => headersOf(r)['webhook-id'])).size).toBe(1);
    const stamps = requests.map((r) => Number(headersOf(r)['webhook-timestamp']));
    expect([...stamps].sort((a, b) => a - b)).toEqual(stamps);
    for (const request of requests) {
      expect(Number(headersOf(request)['webhook-timestamp'])).toBeLessThanOrEqual(Math.ceil(request.receivedAt / 1000));
    }
  });

  it('let a receiver refuse a captured delivery replayed after the tolerance, or with a forged timestamp', async () => {
    const { secret, requests } = await deliverOne('/ok/replayed');
    const [captured] = requests;
    const headers = headersOf(captured!);
    const webhook = new Webhook(standardSecret(secret));
    const clock = jest.spyOn(Date, 'now').mockReturnValue(captured!.receivedAt + 6 * 60_000);
    try {
      expect(() => webhook.verify(captured!.body, headers)).toThrow(new WebhookVerificationError('Message timestamp too old'));
      // The v1 signature alone cannot tell a replay: this is what the timestamp adds.
      expect(verifySignature(captured!.body, headers['x-service-signature'], secret)).toBe(true);
      const forged = { ...headers, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) };
      expect(() => webhook.verify(captured!.body, forged)).toThrow(new WebhookVerificationError('No matching signature found'));
    } finally {
      clock.mockRestore();
    }
  });

  it('are keyed with the secret’s characters, not the bytes its hex spells, and not another secret', async () => {
    const { secret, requests } = await deliverOne('/ok/keying');
    const [received] = requests;
    const hexBytes = `whsec_${Buffer.from(secret, 'hex').toString('base64')}`;
    const other = standardSecret('0'.repeat(64));

    expect(() => new Webhook(hexBytes).verify(received!.body, headersOf(received!))).toThrow(WebhookVerificationError);
    expect(() => new Webhook(other).verify(received!.body, headersOf(received!))).toThrow(WebhookVerificationError);
    expect(() => new Webhook(standardSecret(secret)).verify(received!.body, headersOf(received!))).not.toThrow();
  });
});

describe('signStandardWebhook', () => {
  it('gives exactly the signature the reference library computes for the same id, timestamp, body and secret', () => {
    const secret = 'c0ffee'.repeat(10) + 'beef';
    const body = Buffer.from('{"event":"scan.completed","data":{"domain":"café.example"}}', 'utf8');
    const signedAt = new Date('2026-11-23T04:00:00.000Z');

    const ours = signStandardWebhook('dlv_0123', signedAt.getTime() / 1000, body, secret);

    expect(ours).toBe(new Webhook(standardSecret(secret)).sign('dlv_0123', signedAt, body));
  });
});
