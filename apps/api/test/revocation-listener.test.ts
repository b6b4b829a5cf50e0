import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, createLogger, RevocationListener, type Db } from '@svc/core';
import { seedAccount, startTcpProxy, TEST_DATABASE_URL, waitFor, type TcpProxy } from '@svc/core/testing';

describe('The revocation listener over a connection that silently dies', () => {
  let proxy: TcpProxy;
  let db: Db;

  beforeAll(async () => {
    const target = new URL(TEST_DATABASE_URL);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
  });
  afterAll(async () => {
    await proxy.close();
    await db.destroy();
  });

  it('notices within its check interval, distrusts the cache meanwhile, reconnects and hears revocations again', async () => {
    const url = new URL(TEST_DATABASE_URL);
    url.host = `127.0.0.1:${proxy.port}`;
    const changes: boolean[] = [];
    const revoked: string[] = [];
    const listener = new RevocationListener(
      url.toString(),
      { onRevoked: (id) => revoked.push(id), onConnectionChange: (listening) => changes.push(listening) },
      createLogger('error', { silent: true }),
      { checkIntervalMs: 200, checkTimeoutMs: 300 },
    );
    await listener.start();
    try {
      expect(listener.listening).toBe(true);

      proxy.blackhole();
      const noticed = await waitFor(() => changes.includes(false), 10_000, 'the silent drop to be noticed').catch(() => false);
      const back = await waitFor(() => changes.at(-1) === true && changes.length >= 3, 10_000, 'a new connection').catch(() => false);
      const { keyId } = await seedAccount(db, ['read:sites']);
      await db('api_keys').where({ id: keyId }).update({ revoked_at: db.fn.now() });
      const heard = await waitFor(() => revoked.includes(keyId), 10_000, 'the revocation notice').catch(() => false);

      expect(noticed).toBe(true);
      expect(back).toBe(true);
      expect(changes).toEqual([true, false, true]);
      expect(heard).toBe(true);
    } finally {
      await listener.stop();
    }
  });
});
