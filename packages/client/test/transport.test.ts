import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { seedAccount, seedSite } from '@svc/core/testing';
import { AuthenticationError, NetworkError, NotFoundError, PermissionError, RateLimitError, ServerError, SiteVisibilityClient, SiteVisibilityError, type RetryInfo } from '../src/index.js';
import { startApi, type ListeningApi } from './support.js';

let api: ListeningApi;
let broken: ListeningApi;
let brokenRequests = 0;
/** The Idempotency-Key header of each request the broken API received. */
const brokenKeys: Array<string | undefined> = [];
/** The shape of a key (so the API looks it up), matching none. */
const WELL_FORMED_UNKNOWN_KEY = `svc_live_${'A'.repeat(32)}`;

beforeAll(async () => {
  api = await startApi({ RATE_LIMIT_PER_MINUTE: '3' });
  // The real API over a database that does not exist: every query fails, so it answers 500.
  broken = await startApi({ DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/svc_test_does_not_exist' });
  broken.server.on('request', (req: { headers: Record<string, string | string[] | undefined> }) => {
    brokenRequests += 1;
    brokenKeys.push(req.headers['idempotency-key'] as string | undefined);
  });
});
afterAll(async () => {
  await api.close();
  await broken.close();
});

async function caught(promise: Promise<unknown>): Promise<SiteVisibilityError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof SiteVisibilityError) return error;
    throw error;
  }
  throw new Error('expected the call to fail');
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('SiteVisibilityClient against the real API', () => {
  it('reads the account’s sites and one site, ignoring the base url’s trailing /api/v1', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites']);
    const site = await seedSite(api.db, accountId, { name: 'Acme' });
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: `${api.baseUrl}/api/v1/` });

    const sites = await client.sites.list();
    const detail = await client.sites.get(site.id);

    expect(sites.map((s) => s.id)).toEqual([site.id]);
    expect(detail).toEqual({ ...sites[0], latestScan: null });
  });

  it('turns the error envelope into SiteVisibilityError with code, status, message and Request-Id', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl });

    const scope = await caught(client.sites.list());
    const missing = await caught(new SiteVisibilityClient({ apiKey: 'svc_live_unknown', baseUrl: api.baseUrl }).sites.list());

    expect(scope).toMatchObject({ code: 'insufficient_scope', status: 403, retryable: false });
    expect(scope.message).toContain('read:sites');
    expect(scope.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(missing).toMatchObject({ code: 'invalid_key', status: 401 });
  });

  it('reports a 429 at once when asked to, with Retry-After', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl, onRateLimit: 'throw' });
    for (let i = 0; i < 3; i++) await client.webhooks.list();

    const limited = await caught(client.webhooks.list());

    expect(limited).toMatchObject({ code: 'rate_limited', status: 429, retryAfterSeconds: 60 });
  });

  it('waits Retry-After on a 429 by default, tells onRetry, and the wait can be cancelled', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);
    const controller = new AbortController();
    const retries: RetryInfo[] = [];
    const client = new SiteVisibilityClient({
      apiKey: key,
      baseUrl: api.baseUrl,
      onRetry: (info) => {
        retries.push(info);
        controller.abort(new Error('cancelled by the caller'));
      },
    });
    for (let i = 0; i < 3; i++) await client.webhooks.list();

    const outcome = await client.webhooks.list({ signal: controller.signal }).then(
      () => 'resolved',
      (error: Error) => error.message,
    );

    expect(outcome).toBe('cancelled by the caller');
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ method: 'GET', path: '/webhooks', retry: 1, delayMs: 60_000, reason: 'rate_limited' });
  });

  it('fails a 429 at once when its Retry-After is longer than maxRetryAfterSeconds, saying how long the service asked for', async () => {
    const { key } = await seedAccount(api.db, ['read:webhooks']);
    const retries: RetryInfo[] = [];
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl, maxRetryAfterSeconds: 30, onRetry: (info) => retries.push(info) });
    for (let i = 0; i < 3; i++) await client.webhooks.list();

    const limited = await caught(client.webhooks.list());

    expect(limited).toMatchObject({ code: 'rate_limited', status: 429, retryAfterSeconds: 60 });
    expect(limited.message).toContain('the service asked to wait 60 s, longer than maxRetryAfterSeconds, 30 s');
    expect(retries).toEqual([]);
  });

  it('refuses a maxRetryAfterSeconds longer than a timer can wait, and a maxResponseBytes below one byte', () => {
    expect(() => new SiteVisibilityClient({ apiKey: 'k', baseUrl: api.baseUrl, maxRetryAfterSeconds: 2_147_484 })).toThrow(/from 0 to 2147483/);
    expect(() => new SiteVisibilityClient({ apiKey: 'k', baseUrl: api.baseUrl, maxRetryAfterSeconds: 1.5 })).toThrow(TypeError);
    expect(() => new SiteVisibilityClient({ apiKey: 'k', baseUrl: api.baseUrl, maxResponseBytes: 0 })).toThrow(TypeError);
  });

  it('refuses an answer larger than maxResponseBytes as invalid_response, and reads one within it', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites']);
    for (let i = 0; i < 5; i++) await seedSite(api.db, accountId, { name: `Site with a long enough name ${i}` });
    const small = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl, maxResponseBytes: 200 });
    const roomy = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl, maxResponseBytes: 100_000 });

    const refused = await caught(small.sites.list());
    const sites = await roomy.sites.list();

    expect(refused).toMatchObject({ code: 'invalid_response', status: 200 });
    expect(refused.message).toBe('the answer is larger than maxResponseBytes (200 bytes)');
    expect(sites).toHaveLength(5);
  });

  it('throws the subclass of each class of failure, each a SiteVisibilityError with its code, status and Request-Id', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);
    const quick = { maxRetries: 0, onRateLimit: 'throw' as const };
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl, ...quick });
    const wrongKey = new SiteVisibilityClient({ apiKey: WELL_FORMED_UNKNOWN_KEY, baseUrl: api.baseUrl, ...quick });
    const failing = new SiteVisibilityClient({ apiKey: key, baseUrl: broken.baseUrl, ...quick });
    const unreachable = new SiteVisibilityClient({ apiKey: key, baseUrl: `http://127.0.0.1:${await closedPort()}`, ...quick });

    const failures = [
      [await caught(wrongKey.sites.list()), AuthenticationError, 'invalid_key', 401],
      [await caught(client.webhooks.list()), PermissionError, 'insufficient_scope', 403],
      [await caught(client.sites.get('site_nope')), NotFoundError, 'not_found', 404],
      [await caught(failing.sites.list()), ServerError, 'server_error', 500],
      [await caught(unreachable.sites.list()), NetworkError, 'network_error', 0],
    ] as const;
    // Two of the limit's three were spent above (a refused scope and a 404 count); the third is this one.
    await client.sites.list();
    const limited = await caught(client.sites.list());

    for (const [error, kind, code, status] of failures) {
      expect({ name: error.name, code: error.code, status: error.status }).toEqual({ name: kind.name, code, status });
      expect(error).toBeInstanceOf(kind);
      expect(error).toBeInstanceOf(SiteVisibilityError);
      expect(error.requestId === null).toBe(status === 0);
    }
    expect(limited).toBeInstanceOf(RateLimitError);
    expect(limited).toMatchObject({ code: 'rate_limited', status: 429, retryAfterSeconds: 60 });
  });

  it('retries a GET after a 5xx with backoff, a bounded number of times, then reports server_error', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);
    const retries: RetryInfo[] = [];
    const client = new SiteVisibilityClient({ apiKey: key, baseUrl: broken.baseUrl, maxRetries: 2, retryBaseDelayMs: 10, onRetry: (info) => retries.push(info) });
    const before = brokenRequests;

    const error = await caught(client.sites.list());

    expect(error).toMatchObject({ code: 'server_error', status: 500, retryable: true });
    expect(brokenRequests - before).toBe(3);
    expect(retries.map((r) => [r.retry, r.reason])).toEqual([
      [1, 'server_error'],
      [2, 'server_error'],
    ]);
    expect(retries.every((r) => r.delayMs >= 0 && r.delayMs <= 10 * 2 ** (r.retry - 1))).toBe(true);
  });

  it('retries a POST after a 5xx as it retries a GET, with the same Idempotency-Key on every try', async () => {
    const retries: RetryInfo[] = [];
    const client = new SiteVisibilityClient({ apiKey: WELL_FORMED_UNKNOWN_KEY, baseUrl: broken.baseUrl, maxRetries: 3, retryBaseDelayMs: 1, onRetry: (info) => retries.push(info) });
    const before = brokenRequests;

    const error = await caught(client.webhooks.create({ url: 'https://example.com/hook', events: ['*'] }));
    const again = await caught(client.webhooks.create({ url: 'https://example.com/hook', events: ['*'] }));

    expect(error).toMatchObject({ code: 'server_error', status: 500 });
    expect(again).toMatchObject({ code: 'server_error', status: 500 });
    expect(brokenRequests - before).toBe(8);
    expect(retries.map((r) => [r.method, r.reason])).toEqual(Array.from({ length: 6 }, () => ['POST', 'server_error']));
    const [first, second] = [brokenKeys.slice(before, before + 4), brokenKeys.slice(before + 4, before + 8)];
    expect(first[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(first)).toEqual(new Set([first[0]]));
    expect(new Set(second)).toEqual(new Set([second[0]]));
    expect(second[0]).not.toBe(first[0]);
  });

  it('sends no Idempotency-Key on a GET or DELETE', async () => {
    const client = new SiteVisibilityClient({ apiKey: WELL_FORMED_UNKNOWN_KEY, baseUrl: broken.baseUrl, maxRetries: 0 });
    const before = brokenRequests;

    await caught(client.sites.list());
    await caught(client.webhooks.delete('wh_1'));

    expect(brokenKeys.slice(before)).toEqual([undefined, undefined]);
  });

  it('retries a connection that was refused, even a POST, since nothing was sent', async () => {
    const retries: RetryInfo[] = [];
    const client = new SiteVisibilityClient({ apiKey: WELL_FORMED_UNKNOWN_KEY, baseUrl: `http://127.0.0.1:${await closedPort()}`, maxRetries: 2, retryBaseDelayMs: 1, onRetry: (info) => retries.push(info) });

    const error = await caught(client.webhooks.create({ url: 'https://example.com/hook', events: ['*'] }));

    expect(error).toMatchObject({ code: 'network_error', status: 0, requestId: null });
    expect(error.message).toContain('ECONNREFUSED');
    expect(retries.map((r) => r.reason)).toEqual(['network_error', 'network_error']);
  });

  it('stops at once when the signal is aborted before the call', async () => {
    const client = new SiteVisibilityClient({ apiKey: WELL_FORMED_UNKNOWN_KEY, baseUrl: api.baseUrl });
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(client.sites.list({ signal: controller.signal })).rejects.toThrow('stop');
  });
});
