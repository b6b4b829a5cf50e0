import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort, holdPort, httpGet, TEST_DATABASE_URL, TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

let held: Awaited<ReturnType<typeof holdPort>>;
let takenPort: number;
beforeAll(async () => {
  held = await holdPort();
  takenPort = held.port;
});
afterAll(async () => {
  await held.release();
});

/** A real API process (`npm run start:api`'s entry); stopped by PID with SIGTERM. */
async function withApi(env: Record<string, string>, run: (port: number, stdout: () => string) => Promise<void>): Promise<void> {
  const port = await freePort();
  let stdout = '';
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: TEST_REDIS_URL, QUEUE_PREFIX: `test-${uniqueTag()}`, PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitFor(async () => (await httpGet(`http://127.0.0.1:${port}/readyz`)).status === 200, 20_000, 'the API to be ready').catch((error: Error) => {
      throw new Error(`${error.message}; its output: ${stdout}`);
    });
    await run(port, () => stdout);
  } finally {
    if (child.pid && child.exitCode === null) process.kill(child.pid, 'SIGTERM');
    await exited;
  }
}

describe('the API process and its METRICS_PORT', () => {
  it('logs one warning naming METRICS_PORT when the port is taken, and serves the API anyway', async () => {
    // With SECRETS_ENCRYPTION_KEY, so the port's is the only warning (not the one about plain-text secrets).
    await withApi({ METRICS_PORT: String(takenPort), LOG_LEVEL: 'warn', SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('base64') }, async (port, stdout) => {
      const health = await httpGet(`http://127.0.0.1:${port}/healthz`);

      expect(health.status).toBe(200);
      const warnings = stdout().split('\n').filter((line) => line.includes('"level":"warn"'));
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({ variable: 'METRICS_PORT', port: takenPort, error: 'EADDRINUSE' });
    });
  });

  it('serves /metrics on METRICS_PORT and not on PORT', async () => {
    const metricsPort = await freePort();
    await withApi({ METRICS_PORT: String(metricsPort), LOG_LEVEL: 'error' }, async (port) => {
      const metrics = await httpGet(`http://127.0.0.1:${metricsPort}/metrics`);
      const onPublic = await httpGet(`http://127.0.0.1:${port}/metrics`);

      expect(metrics.status).toBe(200);
      expect(metrics.text).toContain('svc_api_requests_total{method="GET",route="/readyz",status="200"}');
      expect(onPublic.status).toBe(404);
      expect(onPublic.text).not.toContain('svc_api');
    });
  });
});
