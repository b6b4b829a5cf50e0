import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Knex } from 'knex';
import { createDb, createLogger, generateApiKey, hashApiKey, KEY_DISPLAY_LENGTH, newId, revokeApiKeyEverywhere, RevocationListener, type Db } from '@svc/core';
import { createIsolatedDatabase, holdConnections, seedAccount, seedSite, testConfig, waitFor, watchPool } from '@svc/core/testing';
import { KeyCache, KnownKeys, UnknownKeyCache } from '../src/app.js';
import { KeyLookupGate } from '../src/auth/key-lookup-gate.js';
import { keyNotificationEvents } from '../src/auth/key-notifications.js';
import { createTestApi, listen, whenRedisReady, type ListeningApi, type TestApi } from './support.js';

const FLOOD = 200;

interface ErrorBody {
  error: { code: string; message: string };
}

interface Answer {
  status: number;
  body: unknown;
  wwwAuthenticate: string | null;
}

/** Postgres lookups of keys the app makes (knex's 'query' event, which the hot read emits too). */
function countKeyLookups(db: Knex): { readonly count: number; stop(): void } {
  let count = 0;
  const listener = (query: { sql: string }) => {
    if (/^select .* from api_keys where key_hash/i.test(query.sql)) count += 1;
  };
  db.on('query', listener);
  return {
    get count() {
      return count;
    },
    stop: () => db.off('query', listener),
  };
}

async function get(http: ListeningApi, key: string): Promise<Answer> {
  const res = await fetch(`${http.base}/api/v1/sites`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: await res.json(), wwwAuthenticate: res.headers.get('www-authenticate') };
}

/** 401 invalid_key, exactly as every refused key is answered. */
function expectInvalidKey(answer: Answer): void {
  expect(answer.status).toBe(401);
  expect(answer.body as ErrorBody).toEqual({ error: { code: 'invalid_key', message: 'The API key is unknown, revoked or no longer active.' } });
  expect(answer.wwwAuthenticate).toBe('Bearer');
}

/** A key inserted straight into the table, as the Settings service (another process) would. */
async function insertKey(db: Db, accountId: string, key: string): Promise<string> {
  const id = newId('key');
  await db('api_keys').insert({ id, account_id: accountId, name: 'elsewhere', key_hash: hashApiKey(key), prefix: key.slice(0, KEY_DISPLAY_LENGTH), scopes: 'read:sites' });
  return id;
}

describe('A flood of random well-formed keys at an API that listens for key notifications (the key filter)', () => {
  let db: Db;
  let api: TestApi;
  let http: ListeningApi;
  let knownKeys: KnownKeys;
  let listener: RevocationListener;
  // Entries expire at once: every request of a found key is a re-validation.
  const keyCache = new KeyCache(1);
  // A database of its own: keys other test files create meanwhile would be announced on the
  // shared one, and while the filter reads an announced key it looks unknown keys up.
  let database: Awaited<ReturnType<typeof createIsolatedDatabase>>;

  beforeAll(async () => {
    database = await createIsolatedDatabase();
    const config = testConfig({ DATABASE_URL: database.url, DB_POOL_MAX: '8' });
    db = createDb(config.databaseUrl, { poolMax: 8 });
    const unknownKeyCache = new UnknownKeyCache();
    knownKeys = new KnownKeys(db, createLogger('error', { silent: true }));
    keyCache.setTrusted(false);
    // Wired as main.ts wires them.
    listener = new RevocationListener(
      config.databaseUrl,
      keyNotificationEvents({ keyCache, unknownKeyCache, knownKeys }),
      createLogger('error', { silent: true }),
    );
    await listener.start();
    api = createTestApi({ DATABASE_URL: database.url, RATE_LIMIT_PER_MINUTE: '100000', DB_POOL_MAX: '8' }, { db }, { keyCache, unknownKeyCache, knownKeys });
    http = await listen(api);
    await whenRedisReady(api.redis);
  });
  afterAll(async () => {
    await http.close();
    await listener.stop();
    knownKeys.stop();
    await api.close();
    await db.destroy();
    await database.drop();
  });

  it(`refuses ${FLOOD} random keys with 401 invalid_key and no Postgres lookup, while a key whose cache entry expired is answered 200 after one`, async () => {
    const account = await seedAccount(db, ['read:sites']);
    await seedSite(db, account.accountId);
    await waitFor(() => knownKeys.ready && knownKeys.verdict(hashApiKey(account.key)) === 'present', 10_000, 'the new key in the filter');
    expect((await get(http, account.key)).status).toBe(200);
    await waitFor(() => keyCache.get(hashApiKey(account.key)) === undefined, 1_000, 'the cache entry to expire');
    const lookups = countKeyLookups(db);

    const [flood, legitimate] = await Promise.all([
      Promise.all(Array.from({ length: FLOOD }, () => get(http, generateApiKey()))),
      get(http, account.key),
    ]);
    lookups.stop();

    for (const answer of flood) expectInvalidKey(answer);
    expect(legitimate.status).toBe(200);
    // The re-validation of the legitimate key, and nothing for the flood.
    expect(lookups.count).toBe(1);
  });

  it('accepts a key another process creates as soon as its creation is heard, and refuses it once revoked', async () => {
    const { accountId } = await seedAccount(db, ['read:sites']);
    const key = generateApiKey();
    await waitFor(() => knownKeys.ready, 10_000, 'the filter to settle');
    expectInvalidKey(await get(http, key));

    const keyId = await insertKey(db, accountId, key);
    await waitFor(() => knownKeys.ready && knownKeys.verdict(hashApiKey(key)) === 'present', 10_000, 'the creation to be heard');
    const accepted = await get(http, key);
    await revokeApiKeyEverywhere({ db, redis: api.redis, prefix: api.config.queuePrefix }, keyId);
    const refused = await get(http, key);
    await waitFor(() => knownKeys.verdict(hashApiKey(key)) === 'absent', 10_000, 'the revocation to be heard');

    expect(accepted.status).toBe(200);
    expectInvalidKey(refused);
  });

  it('looks an unknown key up in Postgres again once it no longer hears key notifications', async () => {
    await waitFor(() => knownKeys.ready, 10_000, 'the filter to settle');
    knownKeys.listeningChanged(false);
    try {
      const lookups = countKeyLookups(db);
      const answer = await get(http, generateApiKey());
      lookups.stop();

      expectInvalidKey(answer);
      expect(knownKeys.verdict(hashApiKey(generateApiKey()))).toBe('unsure');
      expect(lookups.count).toBe(1);
    } finally {
      knownKeys.listeningChanged(listener.listening);
    }
  });
});

describe('A flood of random well-formed keys at an API that cannot use the key filter (the lookup lanes)', () => {
  let api: TestApi;
  let http: ListeningApi;
  const gates = { unseen: new KeyLookupGate(1), seen: new KeyLookupGate(1) };
  const keyCache = new KeyCache(1);

  beforeAll(async () => {
    api = createTestApi({ RATE_LIMIT_PER_MINUTE: '100000', DB_POOL_MAX: '4' }, undefined, { keyCache, keyLookupGates: gates });
    http = await listen(api);
    await whenRedisReady(api.redis);
  });
  afterAll(async () => {
    await http.close();
    await api.close();
  });

  it(`re-validates a key whose cache entry expired ahead of ${FLOOD} never-seen keys queued before it`, async () => {
    const account = await seedAccount(api.db, ['read:sites']);
    await seedSite(api.db, account.accountId);
    expect((await get(http, account.key)).status).toBe(200);
    await waitFor(() => keyCache.get(hashApiKey(account.key)) === undefined, 1_000, 'the cache entry to expire');
    const lookups = countKeyLookups(api.db);

    // Every connection taken: the flood's lookups queue up, all of them, before the legitimate request comes.
    const held = await holdConnections(api.db, 4);
    const pool = watchPool(api.db);
    const flood = Promise.all(Array.from({ length: FLOOD }, () => get(http, generateApiKey())));
    let legitimate: Promise<{ answer: Answer; floodLookupsBefore: number; floodQueued: number }> | undefined;
    try {
      await waitFor(() => gates.unseen.queued === FLOOD - 1, 10_000, 'the whole flood queued');
      legitimate = get(http, account.key).then((answer) => ({ answer, floodLookupsBefore: lookups.count - 1, floodQueued: gates.unseen.queued }));
      // The flood's one running lookup and the re-validation, each in its own lane, both waiting for a connection.
      await waitFor(() => pool.pending >= 2, 5_000, 'the re-validation waiting for a connection beside the flood');
    } finally {
      held.release();
      pool.stop();
    }
    const [floodAnswers, first] = await Promise.all([flood, legitimate]);
    lookups.stop();

    expect(first.answer.status).toBe(200);
    // Answered while most of the flood still waited for its lane.
    expect(first.floodQueued).toBeGreaterThan(FLOOD / 2);
    expect(first.floodLookupsBefore).toBeLessThan(FLOOD / 2);
    for (const answer of floodAnswers) expectInvalidKey(answer);
    expect(lookups.count).toBe(FLOOD + 1);
  });
});
