import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, createOperatorDb, OPERATOR_POOL_MAX, type Db } from '@svc/core';
import {
  freePort,
  holdConnections,
  httpGet,
  nonLoopbackAddress,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  tryConnect,
  uniqueTag,
  waitFor,
  watchPool,
} from '@svc/core/testing';
import { createTestApi, listen, whenRedisReady, type ListeningApi, type TestApi } from './support.js';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));
const PROBES = 200;

interface ReadyzBody {
  status: string;
  checks: { postgres: string; redis: string };
}

/** A real API process (`npm run start:api`'s entry), ready, with its METRICS_PORT; stopped with SIGTERM. */
async function withApi(env: Record<string, string>, run: (ports: { port: number; metricsPort: number }) => Promise<void>): Promise<void> {
  const [port, metricsPort] = [await freePort(), await freePort()];
  let output = '';
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: TEST_DATABASE_URL,
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: `test-${uniqueTag()}`,
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'error',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitFor(async () => (await httpGet(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 20_000, 'the API to be ready').catch(
      (error: Error) => {
        throw new Error(`${error.message}; its output: ${output}`);
      },
    );
    await run({ port, metricsPort });
  } finally {
    if (child.pid && child.exitCode === null) process.kill(child.pid, 'SIGTERM');
    await exited;
  }
}

const outside = nonLoopbackAddress();
if (!outside) console.warn('operator-ports.test: skipped the interface tests: this machine has no non-loopback IPv4 address');
const withAnInterface = outside ? it : it.skip;

describe('the API process’s metrics port, which has no authentication', () => {
  withAnInterface('listens on loopback only by default: refused on the machine’s other address, served on 127.0.0.1', async () => {
    await withApi({}, async ({ metricsPort }) => {
      const fromOutside = await tryConnect(outside!, metricsPort);
      const onLoopback = await httpGet(`http://127.0.0.1:${metricsPort}/metrics`);

      expect(fromOutside).toBe('ECONNREFUSED');
      expect(onLoopback.status).toBe(200);
      expect(onLoopback.text).toContain('svc_api_requests_total');
    });
  });

  withAnInterface('answers on the machine’s other address once METRICS_HOST=0.0.0.0 opens it', async () => {
    await withApi({ METRICS_HOST: '0.0.0.0' }, async ({ metricsPort }) => {
      const fromOutside = await httpGet(`http://${outside!}:${metricsPort}/metrics`);

      expect(fromOutside.status).toBe(200);
      expect(fromOutside.text).toContain('svc_api_requests_total');
    });
  });

  it('refuses to start with a METRICS_HOST that is not an IP address, in one line naming it', async () => {
    const child = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: TEST_REDIS_URL, METRICS_HOST: 'metrics.example' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));

    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toEqual([expect.stringContaining('METRICS_HOST')]);
  });
});

describe('/readyz of an API whose request pool is busy to its last connection', () => {
  let db: Db;
  let probeDb: Db;
  let api: TestApi;
  let http: ListeningApi;
  const probeName = `svc api operator port ${uniqueTag()}`;

  beforeAll(async () => {
    db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
    probeDb = createOperatorDb(TEST_DATABASE_URL, probeName);
    api = createTestApi({ DB_POOL_MAX: '2' }, { db, probeDb });
    http = await listen(api);
    await whenRedisReady(api.redis);
  });
  afterAll(async () => {
    await http.close();
    await api.close();
    await probeDb.destroy();
    await db.destroy();
  });

  it(`answers ${PROBES} probes at once 200 ready through the operator pool, and never asks the request pool for a connection`, async () => {
    const held = await holdConnections(db, 2);
    const requestPool = watchPool(db);
    try {
      const answers = await Promise.all(
        Array.from({ length: PROBES }, async () => {
          const res = await fetch(`${http.base}/readyz`);
          return { status: res.status, body: (await res.json()) as ReadyzBody };
        }),
      );
      const backends = await probeDb.raw<{ rows: Array<{ n: number }> }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ?',
        [probeName],
      );

      expect(answers.filter((answer) => answer.status === 200 && answer.body.checks.postgres === 'ok')).toHaveLength(PROBES);
      expect(requestPool.acquiresAsked).toBe(0);
      // The request pool is left as the test holds it: both connections in use, no one waiting.
      expect([requestPool.used, requestPool.pending]).toEqual([2, 0]);
      expect(backends.rows[0]!.n).toBeGreaterThanOrEqual(1);
      expect(backends.rows[0]!.n).toBeLessThanOrEqual(OPERATOR_POOL_MAX);
    } finally {
      requestPool.stop();
      held.release();
    }
  });
});
