import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { Webhook } from 'standardwebhooks';
import { signatureHeaders, signBody, standardWebhooksSecret } from '@svc/core';
import * as main from '../src/index.js';
import { isEventOfType, verifyWebhook, verifyWebhookDelivery, verifyWebhookRequest, WebhookVerificationError, type VerifyOptions, type WebhookSecrets } from '../src/webhooks/index.js';

const SECRET = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const NEW = 'fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210';
const WRONG = 'f'.repeat(64);
const BODY = JSON.stringify({ event: 'scan.completed', timestamp: '2026-11-23T04:00:00.000Z', data: { scanId: 'scan_1', siteId: 'site_1', domain: 'acme.example', score: 87.5 } });

/** Headers of an attempt as the dispatcher signs it (its own signing code), with its delivery id. */
function signed(body: string, secret: string, extra: { previousSecret?: string; signedAt?: Date; deliveryId?: string } = {}): Record<string, string> {
  const deliveryId = extra.deliveryId ?? 'dlv_1';
  return {
    'content-type': 'application/json',
    'x-service-delivery-id': deliveryId,
    'x-service-event': 'scan.completed',
    ...signatureHeaders({ deliveryId, body: Buffer.from(body), secret, previousSecret: extra.previousSecret ?? null, signedAt: extra.signedAt ?? new Date() }),
  };
}

/** A fetch Request as a worker runtime hands it to a handler. */
const request = (body: string, headers: Record<string, string>) => new Request('https://hooks.example.com/svc', { method: 'POST', body, headers });

async function reasonOf(verification: Promise<unknown>): Promise<string> {
  try {
    await verification;
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
  return 'verified';
}

describe('@site-visibility/client/webhooks', () => {
  it('is the verifier the main entry exports too: one implementation', () => {
    expect(main.verifyWebhook).toBe(verifyWebhook);
    expect(main.verifyWebhookDelivery).toBe(verifyWebhookDelivery);
    expect(main.verifyWebhookRequest).toBe(verifyWebhookRequest);
    expect(main.WebhookVerificationError).toBe(WebhookVerificationError);
  });

  it('verifies a fetch Request signed as the dispatcher signs, reading its body once, and returns the typed event and delivery id', async () => {
    const incoming = request(BODY, signed(BODY, SECRET));

    const delivery = await verifyWebhookRequest(incoming, SECRET);

    expect(delivery).toEqual({ deliveryId: 'dlv_1', event: JSON.parse(BODY) });
    expect(isEventOfType(delivery.event, 'scan.completed') && delivery.event.data.score).toBe(87.5);
    expect(incoming.bodyUsed).toBe(true);
  });

  it('refuses a Request with a tampered body, a wrong secret, an old or future timestamp, or stripped timestamp headers', async () => {
    const headers = signed(BODY, SECRET, { signedAt: new Date(Date.now() - 301_000) });
    const fresh = signed(BODY, SECRET);
    const { 'webhook-id': _i, 'webhook-timestamp': _t, 'webhook-signature': _s, ...stripped } = fresh;

    expect(await reasonOf(verifyWebhookRequest(request(BODY.replace('87.5', '97.5'), fresh), SECRET))).toBe('invalid_signature');
    expect(await reasonOf(verifyWebhookRequest(request(BODY, fresh), WRONG))).toBe('invalid_signature');
    expect(await reasonOf(verifyWebhookRequest(request(BODY, headers), SECRET))).toBe('timestamp_too_old');
    expect(await reasonOf(verifyWebhookRequest(request(BODY, signed(BODY, SECRET, { signedAt: new Date(Date.now() + 301_000) })), SECRET))).toBe('timestamp_too_new');
    expect(await reasonOf(verifyWebhookRequest(request(BODY, stripped), SECRET))).toBe('missing_timestamp');
    expect(await reasonOf(verifyWebhookRequest(request(BODY, stripped), SECRET, { requireTimestamp: false }))).toBe('verified');
    // The tolerance is the receiver's to widen.
    expect(await reasonOf(verifyWebhookRequest(request(BODY, headers), SECRET, { toleranceSeconds: 600 }))).toBe('verified');
  });

  it('refuses a Standard Webhooks signature made with a wrong secret beside a good X-Service-Signature, and a webhook-id that is not the delivery id', async () => {
    const good = signed(BODY, SECRET);
    const forged = { ...good, 'webhook-signature': signed(BODY, WRONG)['webhook-signature']! };
    const renamed = { ...signed(BODY, SECRET, { deliveryId: 'dlv_2' }), 'x-service-delivery-id': 'dlv_1' };

    expect(await reasonOf(verifyWebhookRequest(request(BODY, forged), SECRET))).toBe('invalid_signature');
    expect(await reasonOf(verifyWebhookRequest(request(BODY, renamed), SECRET))).toBe('id_mismatch');
    expect(await reasonOf(verifyWebhookRequest(request(BODY, { ...good, 'webhook-signature': 'v1,not base64!' }), SECRET))).toBe('invalid_signature');
  });

  it('accepts, during a rotation, an attempt signed with both secrets when holding [old, new] or [new], and refuses it holding the old secret alone', async () => {
    const duringOverlap = () => request(BODY, signed(BODY, NEW, { previousSecret: SECRET }));
    const verdicts: Record<string, string> = {};
    const lists: Record<string, WebhookSecrets> = { 'old,new': [SECRET, NEW], 'new,old': [NEW, SECRET], new: [NEW], 'wrong,new': [WRONG, NEW], old: [SECRET], wrong: [WRONG] };
    for (const [name, secrets] of Object.entries(lists)) verdicts[name] = await reasonOf(verifyWebhookRequest(duringOverlap(), secrets));

    expect(verdicts).toEqual({ 'old,new': 'verified', 'new,old': 'verified', new: 'verified', 'wrong,new': 'verified', old: 'invalid_signature', wrong: 'invalid_signature' });
    await expect(verifyWebhookRequest(duringOverlap(), [])).rejects.toThrow(TypeError);
  });

  it('agrees with the standardwebhooks library’s signatures, and the library accepts what it verifies', async () => {
    const wh = new Webhook(standardWebhooksSecret(SECRET));
    const sentAt = new Date();
    const headers = {
      'x-service-signature': signBody(BODY, SECRET),
      'webhook-id': 'msg_7',
      'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)),
      'webhook-signature': wh.sign('msg_7', sentAt, BODY),
    };

    expect(await verifyWebhookRequest(request(BODY, headers), SECRET)).toEqual({ deliveryId: 'msg_7', event: JSON.parse(BODY) });
    expect(wh.verify(BODY, headers)).toEqual(JSON.parse(BODY));
  });

  it('takes the raw body as bytes of every kind or as text, and headers as a Headers object or a record in any case', async () => {
    const headers = signed(BODY, SECRET);
    const bytes = new TextEncoder().encode(BODY);
    // A view into a larger buffer: only its own bytes are the body.
    const padded = new Uint8Array(bytes.length + 8);
    padded.set(bytes, 4);
    const upper = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toUpperCase(), value]));
    const options: VerifyOptions = {};

    for (const body of [BODY, bytes, bytes.buffer, Buffer.from(BODY), padded.subarray(4, 4 + bytes.length)]) {
      expect((await verifyWebhook(body, headers, SECRET, options)).event).toBe('scan.completed');
    }
    expect((await verifyWebhookDelivery(BODY, new Headers(headers), SECRET)).deliveryId).toBe('dlv_1');
    expect((await verifyWebhookDelivery(BODY, upper, SECRET)).deliveryId).toBe('dlv_1');
    expect(await reasonOf(verifyWebhook(JSON.parse(BODY) as never, headers, SECRET))).toBe('invalid_body');
  });

  it('refuses a Request whose body is over maxBodyBytes (1 MiB by default) as body_too_large: by its Content-Length without reading it, and a stream without one as soon as it passes the cap', async () => {
    const MiB = 1024 * 1024;
    const padded = (size: number) => `${BODY.slice(0, -1)},"padding":"${'x'.repeat(size - BODY.length - 13)}"}`;
    expect(padded(MiB + 1)).toHaveLength(MiB + 1);

    // A declared length over the cap (a server's Request carries the sender's Content-Length): refused before a byte of the body is read.
    const big = padded(MiB + 1);
    const withLength = request(big, { ...signed(big, SECRET), 'content-length': String(MiB + 1) });
    expect(await reasonOf(verifyWebhookRequest(withLength, SECRET))).toBe('body_too_large');
    expect(withLength.bodyUsed).toBe(false);

    // No Content-Length (chunked): the stream is read up to the cap, then cancelled.
    let pulled = 0;
    let cancelled = false;
    const chunk = new Uint8Array(64 * 1024).fill(0x20);
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += chunk.length;
        controller.enqueue(chunk);
      },
      cancel() {
        cancelled = true;
      },
    });
    const chunked = new Request('https://hooks.example.com/svc', { method: 'POST', body: endless, headers: signed(BODY, SECRET), duplex: 'half' } as RequestInit);
    await expect(verifyWebhookRequest(chunked, SECRET)).rejects.toThrow(new WebhookVerificationError('body_too_large', 'the body is larger than maxBodyBytes (1048576 bytes)'));
    expect(cancelled).toBe(true);
    expect(pulled).toBeLessThanOrEqual(MiB + 3 * chunk.length);

    // The cap is the receiver's to set; at it, a delivery verifies.
    const exact = padded(4096);
    expect(await reasonOf(verifyWebhookRequest(request(exact, signed(exact, SECRET)), SECRET, { maxBodyBytes: 4096 }))).toBe('verified');
    expect(await reasonOf(verifyWebhookRequest(request(exact, signed(exact, SECRET)), SECRET, { maxBodyBytes: 4095 }))).toBe('body_too_large');
    // A request object without a stream is read whole and then measured.
    const bare = { headers: new Headers(signed(exact, SECRET)), arrayBuffer: async () => new TextEncoder().encode(exact).buffer };
    expect(await reasonOf(verifyWebhookRequest(bare, SECRET, { maxBodyBytes: 4095 }))).toBe('body_too_large');
    expect(await reasonOf(verifyWebhookRequest(bare, SECRET, { maxBodyBytes: 4096 }))).toBe('verified');
    for (const maxBodyBytes of [Number.NaN, 0, -1, 1.5]) {
      await expect(verifyWebhookRequest(request(exact, signed(exact, SECRET)), SECRET, { maxBodyBytes })).rejects.toThrow(TypeError);
    }
  });

  it('imports nothing but its own relative modules, in the ES module and the CommonJS build: no Node built-in, no dependency', async () => {
    const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
    const graphs: Record<string, string[]> = {};
    for (const entry of ['dist/src/webhooks/index.js', 'cjs/webhooks/index.js']) {
      const seen = new Set<string>();
      const specifiers: string[] = [];
      const visit = async (file: string): Promise<void> => {
        if (seen.has(file)) return;
        seen.add(file);
        const code = await readFile(file, 'utf8');
        for (const [, specifier] of code.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"]([^'"]+)['"]/g)) {
          specifiers.push(specifier!);
          if (specifier!.startsWith('.')) await visit(join(dirname(file), specifier!));
        }
      };
      await visit(join(packageDir, entry));
      graphs[entry] = specifiers.filter((specifier) => !specifier.startsWith('./') && !specifier.startsWith('../'));
      expect(seen.size).toBeGreaterThanOrEqual(4); // index, verify, errors, events
    }

    expect(graphs).toEqual({ 'dist/src/webhooks/index.js': [], 'cjs/webhooks/index.js': [] });
  });
});
