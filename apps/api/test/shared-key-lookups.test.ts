import { describe, expect, it } from '@jest/globals';
import { seedAccount, seedSite, waitFor } from '@svc/core/testing';
import { SharedKeyLookups } from '../src/auth/shared-key-lookups.js';
import { UnknownKeyCache } from '../src/app.js';
import { createListeningTestApi, listen } from './support.js';

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('SharedKeyLookups', () => {
  it('gives concurrent callers of one hash at the same generations one lookup and its answer', async () => {
    const shared = new SharedKeyLookups<string>();
    const answer = deferred<string>();
    let calls = 0;
    const lookup = () => {
      calls += 1;
      return answer.promise;
    };
    const first = shared.run('h', [0, 0], lookup);
    const second = shared.run('h', [0, 0], lookup);
    answer.resolve('key');
    await expect(Promise.all([first, second])).resolves.toEqual(['key', 'key']);
    expect(calls).toBe(1);
    expect(shared.size).toBe(0);
  });

  it('starts a lookup of its own for another hash, or once a cache generation moved', async () => {
    const shared = new SharedKeyLookups<string>();
    const calls: string[] = [];
    const lookup = (label: string) => () => {
      calls.push(label);
      return new Promise<string>((resolve) => setImmediate(() => resolve(label)));
    };
    const a = shared.run('h', [0, 0], lookup('a'));
    const other = shared.run('other', [0, 0], lookup('other'));
    const revokedSince = shared.run('h', [1, 0], lookup('after revocation'));
    const createdSince = shared.run('h', [1, 1], lookup('after creation'));
    const joined = shared.run('h', [1, 1], lookup('never'));
    await expect(Promise.all([a, other, revokedSince, createdSince, joined])).resolves.toEqual([
      'a',
      'other',
      'after revocation',
      'after creation',
      'after creation',
    ]);
    expect(calls).toEqual(['a', 'other', 'after revocation', 'after creation']);
    expect(shared.size).toBe(0);
  });

  it('passes a failed lookup to every caller that joined it, and asks again afterwards', async () => {
    const shared = new SharedKeyLookups<string>();
    const failing = deferred<string>();
    const first = shared.run('h', [0, 0], () => failing.promise);
    const second = shared.run('h', [0, 0], () => Promise.resolve('never'));
    failing.reject(new Error('connection lost'));
    await expect(first).rejects.toThrow('connection lost');
    await expect(second).rejects.toThrow('connection lost');
    await expect(shared.run('h', [0, 0], () => Promise.resolve('again'))).resolves.toBe('again');
  });
});

describe('Many requests with one uncached key at once', () => {
  it('look the key up in Postgres once and are all answered 200', async () => {
    const unknownKeyCache = new UnknownKeyCache();
    const api = await createListeningTestApi({ RATE_LIMIT_PER_MINUTE: '1000', DB_POOL_MAX: '8' }, undefined, { unknownKeyCache });
    const http = await listen(api);
    try {
      const before = unknownKeyCache.currentGeneration();
      const account = await seedAccount(api.db, ['read:sites']);
      await seedSite(api.db, account.accountId);
      // The key's creation is announced; once heard, no generation moves during the requests.
      await waitFor(() => unknownKeyCache.currentGeneration() > before);
      const lookups: string[] = [];
      const onQuery = (query: { sql: string }) => {
        if (/from "?api_keys"?/i.test(query.sql) && /^select/i.test(query.sql)) lookups.push(query.sql);
      };
      api.db.on('query', onQuery);
      const generationBefore = unknownKeyCache.currentGeneration();
      const statuses = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const res = await fetch(`${http.base}/api/v1/sites`, { headers: { authorization: `Bearer ${account.key}` } });
          await res.arrayBuffer();
          return res.status;
        }),
      );
      api.db.off('query', onQuery);
      // A key created meanwhile anywhere in this database (other test files run beside this one)
      // moves the generation, and a request that comes after it starts a lookup of its own.
      const moves = unknownKeyCache.currentGeneration() - generationBefore;
      expect(statuses).toEqual(Array.from({ length: 20 }, () => 200));
      expect(lookups.length).toBeGreaterThanOrEqual(1);
      expect(lookups.length).toBeLessThanOrEqual(1 + moves);
    } finally {
      await http.close();
      await api.close();
    }
  });
});
