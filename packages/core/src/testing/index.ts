import { randomBytes } from 'node:crypto';
import { dropDatabase, migrateToLatest } from '../db/migrate.js';
import { createAccount } from '../accounts/account.repository.js';
import { loadConfig, type Config } from '../config.js';
import type { Db } from '../db/knex.js';
import { fanOutEventsInPages, type FirstAttempt } from '../deliveries/fan-out.js';
import { createApiKey } from '../keys/key.repository.js';
import type { Scope } from '../keys/api-key.js';
import { createSite } from '../sites/site.repository.js';

/** The test database: never the one `npm start` uses. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/svc_test';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A short random tag, so that each test's rows, keys and queues are its own. */
export function uniqueTag(): string {
  return randomBytes(5).toString('hex');
}

/** The configuration tests run with: test database, a queue prefix of their own, private targets allowed. */
export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    DATABASE_URL: TEST_DATABASE_URL,
    // A cluster's settings replace REDIS_URL: the two together are refused.
    ...(overrides.REDIS_CLUSTER_NODES ? {} : { REDIS_URL: TEST_REDIS_URL }),
    LOG_LEVEL: 'error',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    QUEUE_PREFIX: `test-${uniqueTag()}`,
    ...overrides,
  });
}

export const ALL_SCOPES: Scope[] = ['read:sites', 'read:scans', 'read:ai-monitor', 'read:webhooks', 'write:webhooks'];

/** A new account with one key holding the given scopes. */
export async function seedAccount(db: Db, scopes: readonly Scope[] = ALL_SCOPES): Promise<{ accountId: string; key: string; keyId: string }> {
  const account = await createAccount(db, { name: `Test account ${uniqueTag()}` });
  const created = await createApiKey(db, account.id, { name: 'test key', scopes });
  return { accountId: account.id, key: created.key, keyId: created.id };
}

/** Adds a site with a unique domain to an account. */
export async function seedSite(db: Db, accountId: string, input: { name?: string; status?: string } = {}) {
  return createSite(db, accountId, { domain: `site-${uniqueTag()}.example.com`, ...input });
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A database of its own, migrated, for tests whose background work (the dispatcher's sweep)
 * acts on every row it can see; drop() removes it.
 */
export async function createIsolatedDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const url = new URL(TEST_DATABASE_URL);
  const name = `${url.pathname.slice(1)}_${uniqueTag()}`;
  url.pathname = `/${name}`;
  await migrateToLatest(url.toString());
  return {
    url: url.toString(),
    drop: () => dropDatabase(url.toString()),
  };
}
export * from './capturing-logger.js';
export * from './operator-port.js';
export * from './tcp-proxy.js';
export * from './system-commands.js';

/** A loopback port nothing listens on right now (bound and released), for servers a test starts. */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The value of one sample in a Prometheus text scrape: the line of metric `name` whose labels are
 * exactly `labels` (in any order); undefined when there is none.
 */
export function scrapeSample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) found[pair[1]!] = pair[2]!;
    const wanted = Object.entries(labels);
    if (Object.keys(found).length === wanted.length && wanted.every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return undefined;
}

/**
 * A GET on a fresh connection that is closed after it (fetch would keep an idle socket in its
 * pool past the end of the test file, and jest would wait for it).
 */
export async function httpGet(url: string, method = 'GET'): Promise<{ status: number; contentType: string; text: string }> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent: false, headers: { connection: 'close' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A port some other server holds (every interface), as a second process would find its default taken. */
export async function holdPort(): Promise<{ port: number; release(): Promise<void> }> {
  const { createServer } = await import('node:net');
  const server = createServer((socket) => socket.end());
  await new Promise<void>((resolve) => server.listen(0, resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    release: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The dispatcher's fan-out of these events, with every page's first attempts collected (the dispatcher queues them page by page). */
export async function fanOutCollecting(db: Db, eventIds: readonly string[]): Promise<{ firstAttempts: FirstAttempt[] }> {
  const firstAttempts: FirstAttempt[] = [];
  await fanOutEventsInPages(db, eventIds, async (page) => {
    firstAttempts.push(...page.firstAttempts);
  });
  return { firstAttempts };
}
export * from './redis-cluster.js';
