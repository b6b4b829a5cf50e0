import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateApiKey } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { seedAccount, seedSite, waitFor } from '@svc/core/testing';
import { createTestApi, listen, rawExchange, seedLeasedDelivery, statusOf, type ListeningApi, type TestApi } from './support.js';

// Every bound of createApiServer, small enough to watch: the same factory main.ts uses.
const HEADERS_TIMEOUT_MS = 500;
const REQUEST_TIMEOUT_MS = 1_000;
const KEEP_ALIVE_TIMEOUT_MS = 300;
const MAX_CONNECTIONS = 20;
const GENEROUS_MS = 8_000;

let api: TestApi;
let http: ListeningApi;
let key: string;
let accountId: string;
let siteId: string;
let subscriptionId: string;

beforeAll(async () => {
  api = createTestApi({
    RATE_LIMIT_PER_MINUTE: '100000',
    API_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    API_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    API_KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
    API_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
  });
  http = await listen(api);
  const seeded = await seedAccount(api.db);
  key = seeded.key;
  accountId = seeded.accountId;
  siteId = (await seedSite(api.db, seeded.accountId)).id;
  subscriptionId = (await createSubscription(api.db, seeded.accountId, { url: 'https://hooks.example.com/x', events: ['*'] })).id;
});
afterAll(async () => {
  await http.close();
  await api.close();
});

const requestLine = (method: string, path: string) => `${method} ${path} HTTP/1.1\r\nHost: x\r\n`;

async function get(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${http.base}${path}`, { headers });
}

describe('Tokens of every shape, on every route, through the real server', () => {
  const routes: Array<[string, string]> = [
    ['GET', '/api/v1/sites'],
    ['GET', '/api/v1/sites/site_x'],
    ['GET', '/api/v1/webhooks'],
    ['POST', '/api/v1/webhooks'],
    ['DELETE', '/api/v1/webhooks/wh_x'],
    ['GET', '/api/v1/no-such-route'],
  ];
  const shapes: Array<[string, string, 'unauthorized' | 'invalid_key']> = [
    ['no scheme', generateApiKey(), 'unauthorized'],
    ['Basic', `Basic ${Buffer.from('a:b').toString('base64')}`, 'unauthorized'],
    ['Bearer alone', 'Bearer', 'unauthorized'],
    ['two tokens', `Bearer ${generateApiKey()} ${generateApiKey()}`, 'unauthorized'],
    ['a random well-formed key', `Bearer ${generateApiKey()}`, 'invalid_key'],
    ['a wrong prefix', `Bearer sk_live_${'a'.repeat(32)}`, 'invalid_key'],
    ['8 KB of token', `Bearer svc_live_${'A'.repeat(8_000)}`, 'invalid_key'],
    ['lower-case scheme', `bearer ${generateApiKey()}`, 'invalid_key'],
    ['control-free punctuation', 'Bearer !#$%&\'*+-.^_`|~', 'invalid_key'],
  ];

  it.each(routes)('%s %s answers every token shape with its 401, never a 5xx', async (method, path) => {
    const statuses = [];
    for (const [label, authorization, code] of shapes) {
      const res = await fetch(`${http.base}${path}`, { method, headers: { authorization, 'content-type': 'application/json' }, body: method === 'POST' ? '{}' : undefined });
      const body = (await res.json()) as { error: { code: string } };
      statuses.push({ label, status: res.status, code: body.error.code });
    }

    expect(statuses).toEqual(shapes.map(([label, , code]) => ({ label, status: 401, code })));
  });

  it('still serves the real key on every route afterwards', async () => {
    const auth = { authorization: `Bearer ${key}` };
    const statuses = [
      (await get('/api/v1/sites', auth)).status,
      (await get(`/api/v1/sites/${siteId}`, auth)).status,
      (await get('/api/v1/webhooks', auth)).status,
      (await fetch(`${http.base}/api/v1/webhooks/${subscriptionId}`, { method: 'DELETE', headers: auth })).status,
      (await get('/healthz')).status,
    ];

    expect(statuses).toEqual([200, 200, 200, 200, 200]);
  });

  it.each([
    ['a NUL byte in the token', `Authorization: Bearer svc_live_\u0000${'a'.repeat(31)}\r\n`],
    ['a bare CR in the token', `Authorization: Bearer svc_live_\r${'a'.repeat(31)}\r\n`],
    ['a DEL byte', `Authorization: Bearer svc_live_\u007f${'a'.repeat(31)}\r\n`],
    ['Latin-1 bytes', `Authorization: Bearer svc_live_\u00e9\u00ff${'a'.repeat(30)}\r\n`],
    ['a folded (obs-fold) header', `Authorization: Bearer\r\n svc_live_${'a'.repeat(32)}\r\n`],
    ['an empty header name', `: Bearer x\r\n`],
  ])('answers a raw header with %s with a 4xx, never a 5xx', async (_label, header) => {
    const { received } = await rawExchange(http.port, (socket) =>
      socket.write(Buffer.from(`${requestLine('GET', '/api/v1/sites')}${header}Connection: close\r\n\r\n`, 'latin1')),
    );

    expect(statusOf(received)).toBeGreaterThanOrEqual(400);
    expect(statusOf(received)).toBeLessThan(500);
  });

  it('answers two Authorization headers with 401, not with one of them picked', async () => {
    const { received } = await rawExchange(http.port, (socket) =>
      socket.write(`${requestLine('GET', '/api/v1/sites')}Authorization: Bearer ${key}\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`),
    );

    expect(statusOf(received)).toBe(401);
  });
});

describe('Header sizes', () => {
  it('refuses headers over the size bound with 431 and keeps serving', async () => {
    const { received } = await rawExchange(http.port, (socket) =>
      socket.write(`${requestLine('GET', '/api/v1/sites')}X-Padding: ${'a'.repeat(api.config.apiMaxHeaderBytes + 1)}\r\n\r\n`),
    );
    const after = await get('/healthz');

    expect(statusOf(received)).toBe(431);
    expect(after.status).toBe(200);
  });

  it('answers a request with a thousand small headers normally (past the 100th they are ignored)', async () => {
    const junk = Array.from({ length: 1_000 }, (_, i) => `X-J${i}: 1\r\n`).join('');
    const { received } = await rawExchange(http.port, (socket) =>
      socket.write(`${requestLine('GET', '/api/v1/sites')}Authorization: Bearer ${key}\r\n${junk}Connection: close\r\n\r\n`),
    );

    expect(statusOf(received)).toBe(200);
  });
});

describe('Slow and idle clients', () => {
  it('closes a connection that never sends a byte with 408 after the headers timeout', async () => {
    const { received, closedAfterMs } = await rawExchange(http.port, () => undefined, GENEROUS_MS);

    expect(statusOf(received)).toBe(408);
    expect(closedAfterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
  });

  it('closes a slowloris that trickles header lines forever with 408', async () => {
    let timer: NodeJS.Timeout | undefined;
    const { received } = await rawExchange(
      http.port,
      (socket) => {
        socket.write(requestLine('GET', '/api/v1/sites'));
        timer = setInterval(() => socket.writable && socket.write('X-Slow: 1\r\n'), 50);
      },
      GENEROUS_MS,
    ).finally(() => clearInterval(timer));

    expect(statusOf(received)).toBe(408);
  });

  it('closes a request whose body trickles in slower than the request timeout allows, with 408, and stores nothing', async () => {
    let timer: NodeJS.Timeout | undefined;
    // This account's subscriptions only: test files running beside this one create their own.
    const before = await api.db('webhook_subscriptions').where({ account_id: accountId }).count<{ count: string }[]>('* as n');
    const { received, closedAfterMs } = await rawExchange(
      http.port,
      (socket) => {
        socket.write(`${requestLine('POST', '/api/v1/webhooks')}Authorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
        timer = setInterval(() => socket.writable && socket.write(' '), 50);
      },
      GENEROUS_MS,
    ).finally(() => clearInterval(timer));
    const after = await api.db('webhook_subscriptions').where({ account_id: accountId }).count<{ count: string }[]>('* as n');

    expect(statusOf(received)).toBe(408);
    expect(closedAfterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(after).toEqual(before);
  });

  it('closes an idle keep-alive connection after the keep-alive timeout', async () => {
    const { received } = await rawExchange(
      http.port,
      (socket) => socket.write(`${requestLine('GET', '/healthz')}\r\n`),
      GENEROUS_MS,
    );

    expect(statusOf(received)).toBe(200);
  });

  it('still answers a DELETE that waits for an attempt on the wire longer than the request timeout', async () => {
    const { accountId, key: writer } = await seedAccount(api.db, ['write:webhooks']);
    const sub = await createSubscription(api.db, accountId, { url: 'https://hooks.example.com/x', events: ['*'] });
    await seedLeasedDelivery(api.db, accountId, sub.id, REQUEST_TIMEOUT_MS + 500);
    const started = Date.now();

    const res = await fetch(`${http.base}/api/v1/webhooks/${sub.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${writer}` } });

    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThan(REQUEST_TIMEOUT_MS);
    expect(await api.db('webhook_subscriptions').where({ id: sub.id })).toEqual([]);
  });

  it('holds at most the connection bound: past it new sockets are closed at once, and idle ones are reaped', async () => {
    const sockets: Socket[] = [];
    let closed = 0;
    for (let i = 0; i < MAX_CONNECTIONS + 10; i++) {
      const socket = connect(http.port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.on('close', () => (closed += 1));
      socket.resume(); // read what the server sends (its 408), so its close is seen
      sockets.push(socket);
    }
    try {
      const overflowClosed = await waitFor(() => closed >= 10, GENEROUS_MS, 'the sockets past the bound to be closed').catch(() => false);
      const open = await new Promise<number>((resolve, reject) => http.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
      const allReaped = await waitFor(() => closed === sockets.length, GENEROUS_MS, 'every idle socket to be closed').catch(() => false);
      const after = await get('/healthz');

      expect(overflowClosed).toBe(true);
      expect(open).toBeLessThanOrEqual(MAX_CONNECTIONS);
      expect(allReaped).toBe(true);
      expect(after.status).toBe(200);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });
});
