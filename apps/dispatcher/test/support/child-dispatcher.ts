import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { TEST_REDIS_URL } from '@svc/core/testing';
import type { Harness } from './harness.js';

const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));

/** A real dispatcher process (`npm run start:dispatcher`'s entry) on the harness's database, queues and receiver. */
export function spawnDispatcher(
  h: Harness,
  env: Record<string, string> = {},
): { child: ChildProcess; exited: Promise<number | null>; stderr: () => string; stdout: () => string } {
  let stderr = '';
  let stdout = '';
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: h.config.databaseUrl,
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: h.config.queuePrefix,
      LOG_LEVEL: 'error',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_TIMEOUT_MS: String(h.config.webhookTimeoutMs),
      WEBHOOK_RETRY_DELAYS_MS: h.config.webhookRetryDelaysMs.join(','),
      DISPATCHER_SWEEP_INTERVAL_MS: String(h.config.sweepIntervalMs),
      NODE_EXTRA_CA_CERTS: h.certificate.certPath,
      // Off unless a test asks: the default port is shared by every dispatcher on this host.
      METRICS_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, stderr: () => stderr, stdout: () => stdout };
}
