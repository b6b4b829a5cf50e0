import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signatureHeaders, standardWebhooksSecret } from '@svc/core';
import { waitFor } from '@svc/core/testing';
import { createWebhookHandler, isEventOfType, type WebhookEvent } from '../src/index.js';

const SECRET = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const body = (score: number) => JSON.stringify({ event: 'scan.completed', timestamp: new Date().toISOString(), data: { scanId: 'scan_1', siteId: 'site_1', domain: 'acme.example', score } });
const signed = (text: string, deliveryId: string) => ({ 'content-type': 'application/json', 'x-service-delivery-id': deliveryId, ...signatureHeaders({ deliveryId, body: Buffer.from(text), secret: SECRET }) });

const events: Array<{ event: WebhookEvent; deliveryId: string | null }> = [];
const errors: unknown[] = [];
let server: Server;
let base = '';

beforeAll(async () => {
  const handle = createWebhookHandler({ secret: SECRET, maxBodyBytes: 4096, onEvent: (event, context) => void events.push({ event, ...context }), onError: (error) => void errors.push(error) });
  // A plain node:http server, no body parser: the handler reads the stream itself. /text reads it as strings.
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/text') req.setEncoding('utf8');
    handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const post = async (path: string, text: string, headers: Record<string, string>) => {
  const response = await fetch(`${base}${path}`, { method: 'POST', body: text, headers });
  return { status: response.status, text: await response.text() };
};

describe('createWebhookHandler on node:http, reading the body from the stream', () => {
  it('answers 204 and passes the event on once per delivery id, whether the stream gives bytes or text', async () => {
    const first = body(10);
    const second = body(20);

    const answers = [await post('/bytes', first, signed(first, 'dlv_a')), await post('/bytes', first, signed(first, 'dlv_a')), await post('/text', second, signed(second, 'dlv_b'))];
    await waitFor(() => events.length >= 2, 5_000, 'onEvent of dlv_b'); // onEvent runs after the answer

    expect(answers.map((a) => a.status)).toEqual([204, 204, 204]);
    expect(events.map((e) => [e.deliveryId, isEventOfType(e.event, 'scan.completed') && e.event.data.score])).toEqual([
      ['dlv_a', 10],
      ['dlv_b', 20],
    ]);
    expect(errors).toEqual([]);
  });

  it('refuses a tampered body with 400 and its reason, and a body over maxBodyBytes with 413, passing neither on', async () => {
    const text = body(30);
    const before = events.length;

    const tampered = await post('/bytes', text.replace('30', '31'), signed(text, 'dlv_c'));
    const large = `${text}${' '.repeat(5000)}`;
    const tooLarge = await post('/bytes', large, signed(large, 'dlv_d'));

    expect(tampered).toEqual({ status: 400, text: 'webhook verification failed: invalid_signature' });
    expect(tooLarge.status).toBe(413);
    expect(events.length).toBe(before);
  });
});

describe('createWebhookHandler, when it is created', () => {
  const onEvent = () => undefined;

  it('refuses a secret that is missing, empty or malformed at once, not on every delivery', () => {
    const unset = process.env.SVC_CLIENT_TEST_UNSET_VARIABLE; // undefined, as `process.env.WEBHOOK_SECRET` is when not set
    const refusals: Array<[unknown, string]> = [
      [unset, 'got undefined'],
      ['', 'got an empty string'],
      [[], 'got an empty list'],
      [[SECRET, undefined], 'got undefined in the list'],
      [42, 'got a number'],
    ];
    for (const [secret, got] of refusals) {
      expect(() => createWebhookHandler({ secret: secret as string, onEvent })).toThrow(
        new TypeError(`secret is required: the subscription's secret exactly as the API returned it (64 hexadecimal characters), or a non-empty list of them; ${got}`),
      );
    }
    expect(() => createWebhookHandler({ secret: 'whsec_!', onEvent })).toThrow(/^secret starts with whsec_ but is not followed by base64/);
    expect(typeof createWebhookHandler({ secret: [SECRET, standardWebhooksSecret(SECRET)], onEvent })).toBe('function');
  });

  it('refuses options that would switch a check off: a tolerance, body cap or dedupe window that is not a number, a clock or onEvent that is not a function', () => {
    const nan = Number(process.env.SVC_CLIENT_TEST_UNSET_VARIABLE);
    expect(() => createWebhookHandler({ secret: SECRET, onEvent, toleranceSeconds: nan })).toThrow(new TypeError('toleranceSeconds must be a finite number of seconds, 0 or more; got NaN'));
    expect(() => createWebhookHandler({ secret: SECRET, onEvent, maxBodyBytes: nan })).toThrow(new TypeError('maxBodyBytes must be a whole number of bytes, 1 or more; got NaN'));
    expect(() => createWebhookHandler({ secret: SECRET, onEvent, dedupeWindowMs: nan })).toThrow(new TypeError('dedupeWindowMs must be a finite number of milliseconds, 0 or more; got NaN'));
    expect(() => createWebhookHandler({ secret: SECRET, onEvent, dedupeMaxEntries: nan })).toThrow(new TypeError('dedupeMaxEntries must be a whole number, 1 or more; got NaN'));
    expect(() => createWebhookHandler({ secret: SECRET, onEvent, now: 'now' as unknown as () => Date })).toThrow(new TypeError('now must be a function returning a Date'));
    expect(() => createWebhookHandler({ secret: SECRET, onEvent: undefined as unknown as () => void })).toThrow(new TypeError('onEvent must be a function'));
  });
});
