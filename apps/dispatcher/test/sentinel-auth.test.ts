import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, createRedis, deliveryQueueName, deliveryJobId, Redis } from '@svc/core';
import { createCapturingLogger, freePort, testConfig, uniqueTag, waitFor } from '@svc/core/testing';
import { producerOf } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { killAllOwned, killOwned, SENTINEL_MASTER_NAME, startOwned } from './support/sentinel-cluster.js';

const API_MAIN = fileURLToPath(new URL('../../../api/dist/src/main.js', import.meta.url));
const DISPATCHER_MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));
const SENTINEL_PASSWORD = `sentinel pass ${uniqueTag()}`;
const WRONG_PASSWORD = `wrong-${uniqueTag()}`;

const dir = mkdtempSync(join(tmpdir(), 'svc-sentinel-auth-'));
let masterPort: number;
let sentinelPort: number;
let sentinelEnv: Record<string, string>;
let h: Harness;

/** One command to a node of this test, with or without a password; the answer or the error's message. */
/**
 * Waits until a client made as the service makes its own, with this password, has been refused
 * `rounds` times: the service's clients have been through as many reconnection rounds meanwhile
 * (200 ms, 400 ms, … at most 2 s apart). It bounds what must not happen by what the sentinel does.
 */
async function reconnectionRounds(password: string, rounds: number): Promise<void> {
  const probe = createRedis(testConfig({ ...sentinelEnv, REDIS_SENTINEL_PASSWORD: password, REDIS_URL: 'redis://127.0.0.1:1' }), 'bullmq');
  let refused = 0;
  probe.on('error', () => {
    refused += 1;
  });
  try {
    await waitFor(() => refused >= rounds, 20_000, `${rounds} refused connections`);
  } finally {
    probe.disconnect();
  }
}

async function ask(port: number, password: string | undefined, ...command: string[]): Promise<unknown> {
  const redis = new Redis({ host: '127.0.0.1', port, password, lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await redis.call(command[0]!, ...command.slice(1));
  } catch (error) {
    return `error: ${(error as Error).message}`;
  } finally {
    redis.disconnect();
  }
}

beforeAll(async () => {
  masterPort = await freePort();
  sentinelPort = await freePort();
  startOwned('redis-server', ['--port', String(masterPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]);
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `requirepass "${SENTINEL_PASSWORD}"`,
      `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${masterPort} 1`,
      '',
    ].join('\n'),
  );
  startOwned('redis-server', [conf, '--sentinel']);
  await waitFor(
    async () => Array.isArray(await ask(sentinelPort, SENTINEL_PASSWORD, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER_NAME)),
    15_000,
    'the sentinel to monitor the master',
  );
  sentinelEnv = { REDIS_SENTINELS: `127.0.0.1:${sentinelPort}`, REDIS_SENTINEL_NAME: SENTINEL_MASTER_NAME, REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD };
  // REDIS_URL points nowhere: only the sentinel, with its password, can lead anything to Redis.
  h = await createHarness({ ...sentinelEnv, REDIS_URL: 'redis://127.0.0.1:1' });
});

afterAll(async () => {
  try {
    await Promise.race([h?.close(), new Promise((resolve) => setTimeout(resolve, 15_000).unref())]);
  } finally {
    await killAllOwned();
    rmSync(dir, { recursive: true, force: true });
  }
});

async function readyz(port: number): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`, { headers: { connection: 'close' } });
    return { status: res.status, body: await res.text() };
  } catch (error) {
    return { status: 0, body: String(error) };
  }
}

/** A service process of ours (the API or the dispatcher) that reaches Redis only through the sentinel, with this password. */
function startService(main: string, password: string, more: Record<string, string>) {
  return startOwned(process.execPath, [main], {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: h.config.databaseUrl,
    REDIS_URL: 'redis://127.0.0.1:1',
    ...sentinelEnv,
    REDIS_SENTINEL_PASSWORD: password,
    QUEUE_PREFIX: h.config.queuePrefix,
    LOG_LEVEL: 'debug',
    ...more,
  });
}

async function startApi(password: string) {
  const port = await freePort();
  return { api: startService(API_MAIN, password, { PORT: String(port), METRICS_PORT: '0' }), port };
}

describe('Redis through Sentinels that require a password (REDIS_SENTINEL_PASSWORD)', () => {
  it('the sentinel refuses a client without the password, so the stories below need it', async () => {
    const answer = await ask(sentinelPort, undefined, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER_NAME);

    expect(String(answer)).toMatch(/NOAUTH|Authentication required/i);
  });

  it('a producer and a dispatcher find the master through it: the event is queued on the master and delivered', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/sentinel-auth-${uniqueTag()}`;
    await tenant.subscribe(path, ['ai_check.completed']);
    const producerLog = createCapturingLogger('warn');

    // Published before any dispatcher runs: the job can only be on the master if the producer put it there.
    const { eventId } = await completeAiMonitorRun({ ...producerOf(h), logger: producerLog.logger }, { siteId: tenant.site.id, compositeScore: 64 });
    const { id: deliveryId } = (await h.db('deliveries').where({ event_id: eventId }).first('id')) as { id: string };
    const jobKey = `${h.config.queuePrefix}:${deliveryQueueName(0, 1)}:${deliveryJobId(deliveryId, 1)}`;
    const queuedOnMaster = await waitFor(async () => (await ask(masterPort, undefined, 'EXISTS', jobKey)) === 1, 10_000, 'the first attempt to be queued on the master');
    // No sentinel settings passed: the harness hands the dispatcher its own, password included.
    const dispatcher = h.startDispatcher();
    await waitFor(
      async () => (await h.db('deliveries').where({ event_id: eventId, status: 'delivered' }).first()) !== undefined,
      20_000,
      'the event to be delivered through the sentinel',
    );
    await dispatcher.stop();
    const delivery = (await h.db('deliveries').where({ event_id: eventId }).first('id', 'status', 'attempt_count')) as { id: string; status: string; attempt_count: number };
    const requests = h.receiver.to(path).map((request) => request.headers['x-service-delivery-id']);

    expect(producerLog.entries).toEqual([]);
    expect(queuedOnMaster).toBe(true);
    expect(delivery.status).toBe('delivered');
    expect(new Set(requests)).toEqual(new Set([delivery.id]));
    expect(requests.length).toBeLessThanOrEqual(delivery.attempt_count);
  });

  it('a dispatcher with a wrong password is not ready, says why in its log, and never logs either password', async () => {
    // Its own process, as an operator runs it.
    const metricsPort = await freePort();
    const dispatcher = startService(DISPATCHER_MAIN, WRONG_PASSWORD, { METRICS_PORT: String(metricsPort) });

    const notReady = await waitFor(async () => {
      const answer = await readyz(metricsPort);
      return answer.status === 503 && dispatcher.output().includes('redis connection error') && answer;
    }, 20_000, 'the dispatcher to report Redis down and log the connection error');
    await killOwned(dispatcher, 'SIGTERM');

    expect(JSON.parse(notReady.body)).toMatchObject({ status: 'not_ready', checks: { postgres: 'ok', redis: 'down' } });
    // A graceful stop, though Redis was never reached: no unhandled rejection from BullMQ's closing.
    expect({ exitCode: dispatcher.exitCode, signal: dispatcher.signalCode }).toEqual({ exitCode: 0, signal: null });
    expect(dispatcher.output()).not.toMatch(/unhandled|uncaught/i);
    expect(dispatcher.output()).toContain('WRONGPASS');
    expect(dispatcher.output()).not.toContain(WRONG_PASSWORD);
    expect(dispatcher.output()).not.toContain(SENTINEL_PASSWORD);
  });

  it('a dispatcher that never reached Redis stops cleanly in its process: nothing rejects unheard after stop()', async () => {
    const { logger, entries } = createCapturingLogger('warn');
    const dispatcher = h.startDispatcher({ REDIS_SENTINEL_PASSWORD: WRONG_PASSWORD }, { logger });
    await waitFor(() => entries.some((entry) => entry.message === 'redis connection error'), 20_000, 'the wrong password to be refused');

    await dispatcher.stop();
    // An unhandled rejection fails the story that is running: the closed connections' waits would
    // fail within a reconnection round, so the story lasts two of them.
    await reconnectionRounds(WRONG_PASSWORD, 2);
    const readiness = await dispatcher.readiness();

    expect(readiness).toMatchObject({ status: 'not_ready', checks: { redis: 'down', workers: 'stopped' } });
    expect(JSON.stringify(entries)).not.toContain(WRONG_PASSWORD);
  });

  it('an API with the right password is ready with the shared rate limit; with a wrong one it answers 503 and never prints either password', async () => {
    const right = await startApi(SENTINEL_PASSWORD);
    const wrong = await startApi(WRONG_PASSWORD);

    const rightReady = await waitFor(async () => {
      const answer = await readyz(right.port);
      return answer.status === 200 && answer;
    }, 20_000, 'the API with the right password to be ready');
    await waitFor(async () => (await readyz(wrong.port)).status !== 0, 20_000, 'the API with the wrong password to listen');
    // What must NOT happen (becoming ready) is bounded by what the sentinel does: it refuses the
    // wrong password through several reconnection rounds meanwhile.
    await reconnectionRounds(WRONG_PASSWORD, 3);
    const wrongReady = await readyz(wrong.port);
    await Promise.all([killOwned(right.api, 'SIGTERM'), killOwned(wrong.api, 'SIGTERM')]);

    expect(JSON.parse(rightReady.body)).toMatchObject({ status: 'ready', checks: { redis: 'ok' }, rateLimiter: 'shared' });
    expect(wrongReady.status).toBe(503);
    expect([right.api, wrong.api].map((api) => ({ exitCode: api.exitCode, signal: api.signalCode }))).toEqual([
      { exitCode: 0, signal: null },
      { exitCode: 0, signal: null },
    ]);
    expect(JSON.parse(wrongReady.body)).toMatchObject({ status: 'not_ready', checks: { redis: 'down' }, rateLimiter: 'per-process-fallback' });
    for (const output of [right.api.output(), wrong.api.output()]) {
      expect(output).not.toContain(SENTINEL_PASSWORD);
      expect(output).not.toContain(WRONG_PASSWORD);
    }
  });
});
