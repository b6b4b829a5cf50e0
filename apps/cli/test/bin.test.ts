import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from '@jest/globals';
import { createQueues, createRedis, deliveryJobId } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { seedAccount, seedSite, TEST_DATABASE_URL, TEST_REDIS_URL, uniqueTag } from '@svc/core/testing';
import { openTestDb } from './support.js';

const run = promisify(execFile);
/** The committed shim npm links as `svc` (this file runs from dist/test). */
const BIN = fileURLToPath(new URL('../../bin/svc.js', import.meta.url));
/** Long enough for a cold start; a process kept alive by an open connection would hit it. */
const EXIT_TIMEOUT_MS = 20_000;

const db = openTestDb();
afterAll(async () => {
  await db.destroy();
});

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: TEST_REDIS_URL, LOG_LEVEL: 'error', ...extra };
}

describe('the svc bin', () => {
  it('creates an account when run as a child process and ends by itself', async () => {
    const name = `Bin ${uniqueTag()}`;

    const { stdout, stderr } = await run(process.execPath, [BIN, 'accounts', 'create', '--name', name, '--json'], {
      env: childEnv(),
      timeout: EXIT_TIMEOUT_MS,
    });

    expect(stderr).toBe('');
    const out = JSON.parse(stdout) as { id: string };
    expect(await db('accounts').where({ id: out.id }).first()).toMatchObject({ name });
  });

  it('completes a scan of a subscribed site, queueing its first attempt in Redis, and still ends by itself once its connections are closed', async () => {
    const { accountId } = await seedAccount(db);
    const site = await seedSite(db, accountId);
    await createSubscription(db, accountId, { url: `https://receiver.example.com/${uniqueTag()}`, events: ['*'] });
    const prefix = `test-cli-${uniqueTag()}`;
    const env = childEnv({ QUEUE_PREFIX: prefix });
    const started = await run(process.execPath, [BIN, 'scans', 'start', '--site', site.id, '--json'], { env, timeout: EXIT_TIMEOUT_MS });
    const scanId = (JSON.parse(started.stdout) as { id: string }).id;

    const { stdout, stderr } = await run(process.execPath, [BIN, 'scans', 'complete', scanId, '--score', '88', '--json'], {
      env,
      timeout: EXIT_TIMEOUT_MS,
    });

    expect(stderr).toBe('');
    const out = JSON.parse(stdout) as { eventId: string };
    expect(out).toMatchObject({ id: scanId, status: 'completed', score: 88 });
    const [delivery] = await db('deliveries').where({ event_id: out.eventId }).select('id');
    const redis = createRedis(TEST_REDIS_URL, 'bullmq');
    const queues = createQueues(redis, prefix, 1);
    try {
      const job = await queues.deliveries[0]!.getJob(deliveryJobId(delivery.id, 1));
      expect(job?.data).toMatchObject({ deliveryId: delivery.id, attempt: 1 });
    } finally {
      await queues.close();
      redis.disconnect();
    }
  });

  it('exits 2 with one line on stderr and no stack trace for a bad score', async () => {
    const error = await run(process.execPath, [BIN, 'scans', 'complete', 'scan_x', '--score', 'abc'], {
      env: childEnv(),
      timeout: EXIT_TIMEOUT_MS,
    }).then(
      () => undefined,
      (failure: { code: number; stdout: string; stderr: string }) => failure,
    );

    expect(error).toMatchObject({ code: 2, stdout: '' });
    expect(error?.stderr).toBe("svc: error: option '--score <n>' argument 'abc' is invalid. It must be a number such as 87 or 87.5.\n");
  });
});
