import { describe, expect, it } from '@jest/globals';
import { Webhook } from 'standardwebhooks';
import { signatureHeaders, signBody, standardWebhooksSecret } from '@svc/core';
import { verifyWebhook, verifyWebhookDelivery, WebhookVerificationError, isEventOfType } from '../src/index.js';

// Known-answer vectors computed independently with openssl:
//   printf '%s' "$BODY" | openssl dgst -sha256 -hmac "$SECRET"
//   printf '%s' "msg_1.1795406400.$BODY" | openssl dgst -sha256 -hmac "$SECRET" -binary | base64
const SECRET = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const BODY =
  '{"event":"scan.completed","timestamp":"2026-11-23T04:00:00.000Z","data":{"scanId":"scan_1","siteId":"site_1","domain":"acme.example","score":87.5}}';
const V1 = 'sha256=fe3766d29d816ff91d730a2533c1ff67619700d80fccce3c9ed9bea9179abbf6';
const STANDARD = 'v1,gt7DrPVRPWbZxeLBxfBoRALTe6R09PncYeDmEZJbnFA=';
const SENT_AT = 1795406400; // 2026-11-23T04:00:00Z
const at = (seconds: number) => () => new Date(seconds * 1000);

const headers = (extra: Record<string, string> = {}) => ({
  'content-type': 'application/json',
  'x-service-signature': V1,
  'x-service-event': 'scan.completed',
  'x-service-delivery-id': 'msg_1',
  'webhook-id': 'msg_1',
  'webhook-timestamp': String(SENT_AT),
  'webhook-signature': STANDARD,
  ...extra,
});

async function reasonOf(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
  return 'verified';
}

describe('verifyWebhook', () => {
  it('accepts the known-answer vector and returns the typed event', async () => {
    const event = await verifyWebhook(BODY, headers(), SECRET, { now: at(SENT_AT + 10) });
    expect(event.event).toBe('scan.completed');
    expect(isEventOfType(event, 'scan.completed') && event.data.score).toBe(87.5);
  });

  it('agrees with the dispatcher’s own signing for bodies of every kind of byte', async () => {
    const body = JSON.stringify({ event: 'power_up.deployed', timestamp: new Date().toISOString(), data: { deploymentId: 'dep_é✓😀', siteId: 's', powerUpId: 'p\u0000' } });
    const delivery = await verifyWebhookDelivery(Buffer.from(body), { 'x-service-signature': signBody(body, SECRET), 'x-service-delivery-id': 'dlv_1' }, SECRET, { requireTimestamp: false });
    expect(delivery).toEqual({ deliveryId: 'dlv_1', event: JSON.parse(body) });
  });

  it('agrees with the standardwebhooks library, keyed with whsec_ + base64 of the secret as returned', async () => {
    const wh = new Webhook(`whsec_${Buffer.from(SECRET, 'utf8').toString('base64')}`);
    const sign = wh.sign('msg_1', new Date(SENT_AT * 1000), BODY);
    expect(sign).toBe(STANDARD);
    expect(wh.verify(BODY, { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': wh.sign('msg_1', new Date(), BODY) })).toEqual(JSON.parse(BODY));
  });

  it('accepts a Headers object as fetch gives it, and headers in any case', async () => {
    expect((await verifyWebhook(BODY, new Headers(headers()), SECRET, { now: at(SENT_AT) })).event).toBe('scan.completed');
    const upper = Object.fromEntries(Object.entries(headers()).map(([k, v]) => [k.toUpperCase(), v]));
    expect((await verifyWebhook(BODY, upper, SECRET, { now: at(SENT_AT) })).event).toBe('scan.completed');
  });

  it('refuses a changed body, a wrong secret, and a missing or malformed signature', async () => {
    expect(await reasonOf(() => verifyWebhook(BODY.replace('87.5', '97.5'), headers(), SECRET, { now: at(SENT_AT) }))).toBe('invalid_signature');
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), SECRET.replace('0', '1'), { now: at(SENT_AT) }))).toBe('invalid_signature');
    const { 'x-service-signature': _dropped, ...unsigned } = headers();
    expect(await reasonOf(() => verifyWebhook(BODY, unsigned, SECRET, { now: at(SENT_AT) }))).toBe('missing_signature');
    expect(await reasonOf(() => verifyWebhook(BODY, headers({ 'x-service-signature': 'sha256=zz' }), SECRET, { now: at(SENT_AT) }))).toBe('invalid_signature');
    expect(await reasonOf(() => verifyWebhook(BODY, headers({ 'webhook-signature': 'v1,AAAA' }), SECRET, { now: at(SENT_AT) }))).toBe('invalid_signature');
  });

  it('refuses a replay outside the tolerance, in either direction, and a non-numeric timestamp', async () => {
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), SECRET, { now: at(SENT_AT + 301) }))).toBe('timestamp_too_old');
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), SECRET, { now: at(SENT_AT - 301) }))).toBe('timestamp_too_new');
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), SECRET, { now: at(SENT_AT + 3_000), toleranceSeconds: 3_600 }))).toBe('verified');
    expect(await reasonOf(() => verifyWebhook(BODY, headers({ 'webhook-timestamp': '17954064OO' }), SECRET, { now: at(SENT_AT) }))).toBe('invalid_timestamp');
  });

  it('refuses a capture stripped of its Standard Webhooks headers (a replay), unless told the sender has none', async () => {
    const stripped = { 'x-service-signature': V1, 'x-service-delivery-id': 'msg_1' };
    expect(await reasonOf(() => verifyWebhook(BODY, stripped, SECRET))).toBe('missing_timestamp');
    expect(await reasonOf(() => verifyWebhook(BODY, stripped, SECRET, { requireTimestamp: false }))).toBe('verified');
  });

  it('refuses a webhook-id that differs from X-Service-Delivery-Id', async () => {
    expect(await reasonOf(() => verifyWebhook(BODY, headers({ 'x-service-delivery-id': 'msg_2' }), SECRET, { now: at(SENT_AT) }))).toBe('id_mismatch');
  });

  it('passes an event type it does not know through as such', async () => {
    const body = JSON.stringify({ event: 'site.renamed', timestamp: '2027-01-01T00:00:00.000Z', data: { siteId: 's' } });
    const event = await verifyWebhook(body, { 'x-service-signature': signBody(body, SECRET) }, SECRET, { requireTimestamp: false });
    expect(event).toEqual({ event: 'site.renamed', timestamp: '2027-01-01T00:00:00.000Z', data: { siteId: 's' } });
  });

  it('refuses a signed body that is not an event envelope, and parsed JSON instead of raw bytes', async () => {
    const body = '[1,2]';
    expect(await reasonOf(() => verifyWebhook(body, { 'x-service-signature': signBody(body, SECRET) }, SECRET, { requireTimestamp: false }))).toBe('invalid_body');
    expect(await reasonOf(() => verifyWebhook(JSON.parse(BODY) as never, headers(), SECRET))).toBe('invalid_body');
  });

  it('throws a TypeError that says to await it when a result is read without await, as code written for the synchronous verifier of 0.1.0 does', async () => {
    // Code written for 0.1.0: `const event = verifyWebhook(...)` inside a try, then reading the event.
    const pending = verifyWebhook(BODY, headers(), SECRET, { now: at(SENT_AT) });
    const read = (property: string) => () => (pending as unknown as Record<string, unknown>)[property];
    for (const property of ['event', 'data', 'timestamp']) expect(read(property)).toThrow(/await/);
    const delivery = verifyWebhookDelivery(BODY, headers(), SECRET, { now: at(SENT_AT) });
    expect(() => (delivery as unknown as { event: unknown }).event).toThrow(new TypeError('verifyWebhookDelivery() returns a promise since version 0.2.0: read .event of what it resolves to (`const result = await verifyWebhookDelivery(…)`)'));
    expect(() => {
      const { deliveryId } = delivery as unknown as { deliveryId: unknown };
      return deliveryId;
    }).toThrow(TypeError);
    // Awaited, both are what they always were; the guard is invisible to a deep comparison.
    expect((await pending).event).toBe('scan.completed');
    expect(await delivery).toEqual({ deliveryId: 'msg_1', event: JSON.parse(BODY) });
    expect(Object.keys(delivery)).toEqual([]);
  });

  it('refuses a tolerance that is not a finite number of seconds ≥ 0, and a clock that gives no valid Date, instead of accepting a year-old timestamp', async () => {
    const yearLater = at(SENT_AT + 366 * 86_400);
    const unset = Number(process.env.SVC_CLIENT_TEST_UNSET_VARIABLE); // NaN, as an unset variable gives
    for (const toleranceSeconds of [unset, Number.POSITIVE_INFINITY, -1, '300' as unknown as number, null as unknown as number]) {
      await expect(verifyWebhook(BODY, headers(), SECRET, { now: yearLater, toleranceSeconds })).rejects.toThrow(new TypeError(`toleranceSeconds must be a finite number of seconds, 0 or more; got ${typeof toleranceSeconds === 'string' ? 'the string "300"' : String(toleranceSeconds)}`));
    }
    for (const now of [() => new Date('not a date'), () => new Date(Number.NaN), () => SENT_AT as unknown as Date, () => undefined as unknown as Date]) {
      await expect(verifyWebhook(BODY, headers(), SECRET, { now })).rejects.toThrow(/^now\(\) must return a valid Date/);
    }
    await expect(verifyWebhook(BODY, headers(), SECRET, { now: new Date() as unknown as () => Date })).rejects.toThrow(new TypeError('now must be a function returning a Date'));
    await expect(verifyWebhook(BODY, headers(), SECRET, { requireTimestamp: 'false' as unknown as boolean })).rejects.toThrow(new TypeError('requireTimestamp must be true or false; got the string "false"'));
    // Still: 0 is a tolerance (the very second only), and the default is 300.
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), SECRET, { now: at(SENT_AT), toleranceSeconds: 0 }))).toBe('verified');
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), SECRET, { now: at(SENT_AT + 1), toleranceSeconds: 0 }))).toBe('timestamp_too_old');
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), SECRET, { now: yearLater }))).toBe('timestamp_too_old');
  });

  it('accepts the secret in its whsec_ form (the standardWebhooksSecret the API returns beside it), alone or in a list, as the same key', async () => {
    const whsec = standardWebhooksSecret(SECRET);
    expect(whsec).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), whsec, { now: at(SENT_AT) }))).toBe('verified');
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), [standardWebhooksSecret('f'.repeat(64)), whsec], { now: at(SENT_AT) }))).toBe('verified');
    expect(await reasonOf(() => verifyWebhook(BODY, headers(), standardWebhooksSecret('f'.repeat(64)), { now: at(SENT_AT) }))).toBe('invalid_signature');
  });

  it('refuses a whsec_ secret that is not followed by base64, saying what to pass', async () => {
    for (const secret of ['whsec_', 'whsec_not base64!', `whsec_${standardWebhooksSecret(SECRET).slice(6, -1)}`]) {
      await expect(verifyWebhook(BODY, headers(), secret, { now: at(SENT_AT) })).rejects.toThrow(
        new TypeError('secret starts with whsec_ but is not followed by base64: pass the secret exactly as the API returned it (64 hexadecimal characters), or its standardWebhooksSecret unchanged'),
      );
    }
  });

  describe('with a list of secrets, as during a rotation', () => {
    const OLD = SECRET;
    const NEW = 'fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210';
    const WRONG = SECRET.replace('0', '1');
    const SIGNED_AT = new Date(SENT_AT * 1000);
    /** An attempt the dispatcher signs during the overlap: webhook-signature with both secrets (new first), X-Service-Signature with the new one. */
    const duringOverlap = (): Record<string, string> => ({ 'x-service-delivery-id': 'msg_1', ...signatureHeaders({ deliveryId: 'msg_1', body: Buffer.from(BODY), secret: NEW, previousSecret: OLD, signedAt: SIGNED_AT }) });
    const afterOverlap = (): Record<string, string> => ({ 'x-service-delivery-id': 'msg_1', ...signatureHeaders({ deliveryId: 'msg_1', body: Buffer.from(BODY), secret: NEW, signedAt: SIGNED_AT }) });

    it('accepts an attempt signed during the overlap with [old, new] and with [new], in either order', async () => {
      expect(duringOverlap()['webhook-signature']!.split(' ')).toHaveLength(2);
      for (const secrets of [[OLD, NEW], [NEW, OLD], [NEW], [WRONG, NEW]]) {
        expect(await reasonOf(() => verifyWebhook(BODY, duringOverlap(), secrets, { now: at(SENT_AT) }))).toBe('verified');
      }
    });

    it('refuses a list of only wrong secrets, and the old secret alone once X-Service-Signature is made with the new one', async () => {
      expect(await reasonOf(() => verifyWebhook(BODY, duringOverlap(), [WRONG], { now: at(SENT_AT) }))).toBe('invalid_signature');
      expect(await reasonOf(() => verifyWebhook(BODY, duringOverlap(), [WRONG, WRONG.replace('1', '2')], { now: at(SENT_AT) }))).toBe('invalid_signature');
      expect(await reasonOf(() => verifyWebhook(BODY, duringOverlap(), [OLD], { now: at(SENT_AT) }))).toBe('invalid_signature');
    });

    it('checks webhook-signature against every secret too: a v1 signature of the new secret does not carry a Standard signature of a wrong one', async () => {
      // X-Service-Signature made with NEW, webhook-signature carrying only a wrong secret's signature.
      const forged = { ...afterOverlap(), 'webhook-signature': signatureHeaders({ deliveryId: 'msg_1', body: Buffer.from(BODY), secret: WRONG, signedAt: SIGNED_AT })['webhook-signature'] };
      expect(await reasonOf(() => verifyWebhook(BODY, forged, [OLD, NEW], { now: at(SENT_AT) }))).toBe('invalid_signature');
      expect(await reasonOf(() => verifyWebhook(BODY, afterOverlap(), [OLD, NEW], { now: at(SENT_AT) }))).toBe('verified');
    });

    it('accepts a list for the v1 signature alone (a receiver that reads only X-Service-Signature)', async () => {
      const v1Only = { 'x-service-signature': signBody(BODY, NEW), 'x-service-delivery-id': 'msg_1' };
      expect(await reasonOf(() => verifyWebhook(BODY, v1Only, [OLD, NEW], { requireTimestamp: false }))).toBe('verified');
      expect(await reasonOf(() => verifyWebhook(BODY, v1Only, [OLD, WRONG], { requireTimestamp: false }))).toBe('invalid_signature');
    });

    it('agrees with a Standard Webhooks library holding either secret during the overlap', async () => {
      // Signed now, so the library's own clock accepts the timestamp.
      const now = signatureHeaders({ deliveryId: 'msg_1', body: Buffer.from(BODY), secret: NEW, previousSecret: OLD });
      const signed = { 'webhook-id': now['webhook-id']!, 'webhook-timestamp': now['webhook-timestamp']!, 'webhook-signature': now['webhook-signature']! };
      expect(new Webhook(standardWebhooksSecret(OLD)).verify(BODY, signed)).toEqual(JSON.parse(BODY));
      expect(new Webhook(standardWebhooksSecret(NEW)).verify(BODY, signed)).toEqual(JSON.parse(BODY));
      expect(() => new Webhook(standardWebhooksSecret(WRONG)).verify(BODY, signed)).toThrow();
    });

    it('refuses an empty list or a blank secret as a programming error', async () => {
      await expect(verifyWebhook(BODY, duringOverlap(), [])).rejects.toThrow(TypeError);
      await expect(verifyWebhook(BODY, duringOverlap(), [NEW, ''])).rejects.toThrow(TypeError);
    });
  });
});
