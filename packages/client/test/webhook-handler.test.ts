import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signatureHeaders } from '@svc/core';
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
    await new Promise((resolve) => setTimeout(resolve, 20)); // onEvent runs after the answer

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
