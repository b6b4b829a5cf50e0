import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, rateLimitWindowKey } from '@svc/core';
import { freePort, seedAccount, uniqueTag, waitFor } from '@svc/core/testing';
import { producerOf } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { killAllOwned, killOwned, SENTINEL_MASTER_NAME, SentinelCluster, startOwned } from './support/sentinel-cluster.js';

const API_MAIN = fileURLToPath(new URL('../../../api/dist/src/main.js', import.meta.url));
const SVC = fileURLToPath(new URL('../../../cli/bin/svc.js', import.meta.url));
const LIMIT = 30;
const TRICKLE_KEYS = 6;

let cluster: SentinelCluster;
let h: Harness;
let api: ReturnType<typeof startOwned> | undefined;
let apiPort: number;
let sentinelEnv: Record<string, string>;

beforeAll(async () => {
  cluster = await new SentinelCluster().start();
  sentinelEnv = { REDIS_SENTINELS: cluster.sentinels, REDIS_SENTINEL_NAME: SENTINEL_MASTER_NAME };
  // REDIS_URL points nowhere: only the sentinels can lead anything to Redis.
  h = await createHarness({ ...sentinelEnv, REDIS_URL: 'redis://127.0.0.1:1' });
  apiPort = await freePort();
  api = startOwned(process.execPath, [API_MAIN], {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: h.config.databaseUrl,
    REDIS_URL: 'redis://127.0.0.1:1',
    ...sentinelEnv,
    QUEUE_PREFIX: h.config.queuePrefix,
    PORT: String(apiPort),
    METRICS_PORT: '0',
    RATE_LIMIT_PER_MINUTE: String(LIMIT),
    LOG_LEVEL: 'error',
  });
});

afterAll(async () => {
  // Every process this file started is killed by PID, whatever happened above.
  try {
    if (api) await killOwned(api, 'SIGTERM');
    await Promise.race([h?.close(), new Promise((resolve) => setTimeout(resolve, 15_000).unref())]);
  } finally {
    await killAllOwned();
    await cluster?.stop();
  }
});

async function apiGet(path: string, key?: string): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(`http://127.0.0.1:${apiPort}${path}`, {
      headers: key ? { authorization: `Bearer ${key}`, connection: 'close' } : { connection: 'close' },
    });
    return { status: res.status, body: await res.text() };
  } catch (error) {
    return { status: 0, body: String(error) };
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Redis through Sentinel', () => {
  it('survives the master being killed: no 5xx from the API, every event delivered, the rate limit shared again on the new master', async () => {
    await waitFor(async () => (await apiGet('/readyz')).status === 200, 20_000, 'the API to be ready through the sentinels');
    const dispatcher = h.startDispatcher(sentinelEnv);
    const tenant = await seedTenant(h);
    const path = `/ok/sentinel-${uniqueTag()}`;
    const sub = await tenant.subscribe(path, ['ai_check.completed']);
    const keys = await Promise.all(Array.from({ length: TRICKLE_KEYS }, () => seedAccount(h.db, ['read:sites'])));

    // A steady trickle of API requests and events, before, during and after the failover.
    const statuses: number[] = [];
    const eventIds: string[] = [];
    let trickling = true;
    const requests = (async () => {
      for (let i = 0; trickling; i++) {
        statuses.push((await apiGet('/api/v1/sites', keys[i % TRICKLE_KEYS]!.key)).status);
        await pause(80);
      }
    })();
    const events = (async () => {
      for (let i = 0; trickling; i++) {
        eventIds.push((await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: i % 100 })).eventId);
        await pause(150);
      }
    })();

    await waitFor(() => eventIds.length >= 5 && statuses.length >= 5, 10_000, 'the trickle to be under way');
    const oldMaster = cluster.masterPort;
    const requestsAtKill = statuses.length;
    await killOwned(cluster.master);
    await waitFor(async () => (await cluster.masterPortNow()) === cluster.replicaPort, 30_000, 'the sentinels to promote the replica');
    const requestsDuringFailover = statuses.length - requestsAtKill;
    const eventsAtFailover = eventIds.length;
    await waitFor(() => eventIds.length >= eventsAtFailover + 5, 20_000, 'events to be produced on the new master');
    trickling = false;
    await Promise.all([requests, events]);

    // The CLI reaches the new master through the sentinels too: its enqueue does not fail.
    const cli = startOwned(process.execPath, [SVC, 'ai-runs', 'complete', '--site', tenant.site.id, '--score', '77', '--json'], {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: h.config.databaseUrl,
      REDIS_URL: 'redis://127.0.0.1:1',
      ...sentinelEnv,
      QUEUE_PREFIX: h.config.queuePrefix,
    });
    const cliExit = await Promise.race([
      new Promise<number | null>((resolve) => cli.once('exit', (code) => resolve(code))),
      pause(15_000).then(() => 'still running after 15 s'),
    ]);
    expect({ exit: cliExit, output: cli.output() }).toEqual({ exit: 0, output: expect.not.stringContaining('enqueue failed') });
    eventIds.push(JSON.parse(cli.output()).eventId as string);

    // Every event is delivered at least once: the sweep re-queues what the dead master took with it.
    await waitFor(
      async () => Number((await h.db('deliveries').whereIn('event_id', eventIds).where({ status: 'delivered' }).count({ n: '*' }))[0]!.n) === eventIds.length,
      30_000,
      'every event to be delivered after the failover',
    );
    const deliveries = await h.db('deliveries').whereIn('event_id', eventIds).select('id', 'subscription_id');
    const received = new Set(h.receiver.to(path).map((request) => String(request.headers['x-service-delivery-id'])));
    expect(deliveries).toHaveLength(eventIds.length);
    for (const delivery of deliveries) {
      expect(delivery.subscription_id).toBe(sub.id);
      expect(received.has(delivery.id)).toBe(true);
    }

    // The API never answered 5xx (nor dropped a connection) because of the failover.
    expect(requestsDuringFailover).toBeGreaterThan(0);
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((status) => status === 0 || status >= 500)).toEqual([]);
    expect(new Set(statuses)).toEqual(new Set([200]));

    // The rate limit is shared again, counted on the new master (the limiter learns it on its next request).
    await waitFor(
      async () => {
        await apiGet('/api/v1/sites', keys[0]!.key);
        const ready = await apiGet('/readyz');
        return ready.status === 200 && JSON.parse(ready.body).rateLimiter === 'shared';
      },
      20_000,
      'the API to share its rate limit through the new master',
    );
    const fresh = await seedAccount(h.db, ['read:sites']);
    // A key created by another process is known here once its creation is heard (a request racing
    // that notification may be refused once, and a refused request is not counted): the first answer.
    const first = await waitFor(async () => {
      const status = (await apiGet('/api/v1/sites', fresh.key)).status;
      return status === 401 ? undefined : status;
    }, 10_000, 'the API to hear of the new key');
    const answers: number[] = [first];
    for (let i = 1; i < LIMIT + 1; i++) answers.push((await apiGet('/api/v1/sites', fresh.key)).status);
    expect(answers.slice(0, LIMIT)).toEqual(Array(LIMIT).fill(200));
    expect(answers[LIMIT]).toBe(429);
    const counted = await cluster.onNode(cluster.replicaPort, (redis) => redis.zcard(rateLimitWindowKey(h.config.queuePrefix, fresh.keyId)));
    expect(counted).toBe(LIMIT);
    expect(oldMaster).not.toBe(cluster.replicaPort);

    await dispatcher.stop();
  });
});
