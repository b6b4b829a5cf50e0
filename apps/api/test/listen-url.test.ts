import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, type Db } from '@svc/core';
import { createIsolatedDatabase, freePort, httpGet, TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

/**
 * Behind a PgBouncer in transaction mode, DATABASE_URL cannot hold a LISTEN: the API's key
 * listener takes DATABASE_LISTEN_URL instead. Here the two URLs differ by their user, so
 * pg_stat_activity shows which connection went where.
 */
describe('an API whose DATABASE_LISTEN_URL differs from DATABASE_URL', () => {
  let database: Awaited<ReturnType<typeof createIsolatedDatabase>>;
  let db: Db;
  const role = `svc_listen_${uniqueTag().replace(/[^a-z0-9]/gi, '').toLowerCase()}`;
  let api: ReturnType<typeof spawn> | undefined;
  let output = '';

  beforeAll(async () => {
    database = await createIsolatedDatabase();
    db = createDb(database.url, { poolMax: 2 });
    await db.raw(`CREATE ROLE ${role} LOGIN`);
  });

  afterAll(async () => {
    if (api && api.exitCode === null) {
      api.kill('SIGTERM');
      await new Promise((resolve) => api!.once('exit', resolve));
    }
    await db.raw('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ?', [role]);
    await db.destroy();
    await database.drop();
    const admin = createDb(database.url.replace(/\/[^/]+$/, '/postgres'), { poolMax: 1 });
    await admin.raw(`DROP ROLE IF EXISTS ${role}`);
    await admin.destroy();
  });

  it('listens through DATABASE_LISTEN_URL and runs every query through DATABASE_URL', async () => {
    const port = await freePort();
    const listenUrl = new URL(database.url);
    listenUrl.username = role;
    api = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: database.url,
        DATABASE_LISTEN_URL: listenUrl.toString(),
        REDIS_URL: TEST_REDIS_URL,
        QUEUE_PREFIX: `test-listen-${uniqueTag()}`,
        PORT: String(port),
        METRICS_PORT: '0',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    api.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    api.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    await waitFor(async () => (await httpGet(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000, `the API: ${output}`);

    const sessions = () =>
      db('pg_stat_activity')
        .where({ datname: new URL(database.url).pathname.slice(1) })
        .whereNot('pid', db.raw('pg_backend_pid()'))
        .select<Array<{ usename: string; application_name: string; query: string }>>('usename', 'application_name', 'query');
    const listener = await waitFor(async () => (await sessions()).find((row) => row.application_name === 'svc key revocation listener'), 10_000, 'the listening connection');
    expect(listener).toEqual(expect.objectContaining({ usename: role, query: expect.stringMatching(/LISTEN/) }));
    // A request's queries (the readiness probe's, at least) ran as DATABASE_URL's user.
    const others = (await sessions()).filter((row) => row.application_name !== 'svc key revocation listener');
    expect(others.length).toBeGreaterThan(0);
    expect(others.filter((row) => row.usename === role)).toEqual([]);
    expect(output).not.toMatch(/lost its connection/);
  });
});
