import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createDb, createRedis, rateLimitWindowKey, revokeApiKeyEverywhere, revokedKeyMarker, type RedisClient } from '@svc/core';
import { createApiKey } from '@svc/core/operator';
import { askNode, createIsolatedDatabase, freePort, httpGet, seedAccount, TestRedisCluster, uniqueTag, waitFor } from '@svc/core/testing';
import { ApiMetrics } from '../src/app.js';
import { bearer, createTestApi, whenRedisReady, type TestApi } from './support.js';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

/**
 * The API on a real Redis Cluster (3 masters, 3 replicas, redis-server processes of this file):
 * two API processes share the cluster, as two hosts behind a load balancer would.
 */
const LIMIT = 20;
const prefix = `test-cluster-${uniqueTag()}`;
let cluster: TestRedisCluster;
let a: TestApi;
let b: TestApi;
const metricsOf = new Map<TestApi, ApiMetrics>();
/** The operator's own connection to the cluster (as `svc keys revoke` opens). */
let admin: RedisClient;

beforeAll(async () => {
  cluster = await new TestRedisCluster().start();
  const env = { REDIS_CLUSTER_NODES: cluster.seeds, RATE_LIMIT_PER_MINUTE: String(LIMIT), QUEUE_PREFIX: prefix };
  const metricsA = new ApiMetrics();
  const metricsB = new ApiMetrics();
  a = createTestApi(env, { metrics: metricsA });
  b = createTestApi(env, { db: a.db, metrics: metricsB });
  metricsOf.set(a, metricsA).set(b, metricsB);
  admin = createRedis(a.config);
  admin.on('error', () => undefined);
  await Promise.all([whenRedisReady(a.redis), whenRedisReady(b.redis), whenRedisReady(admin)]);
}, 60_000);

afterAll(async () => {
  await b?.close();
  await a?.close();
  admin?.disconnect();
  await cluster?.stop();
});

const get = (api: TestApi, key: string) => request(api.app).get('/api/v1/webhooks').set(bearer(key));
const readyz = (api: TestApi) => request(api.app).get('/readyz');

function expectRateLimited(res: request.Response): void {
  expect(res.status).toBe(429);
  expect(res.body).toEqual({ error: { code: 'rate_limited', message: expect.any(String) } });
  expect(res.headers['retry-after']).toBe('60');
  expect(res.headers['x-ratelimit-limit']).toBe(String(LIMIT));
  expect(res.headers['x-ratelimit-remaining']).toBe('0');
}

/** The key's window as the master serving its slot holds it (asked directly: a wrong master would answer MOVED). */
async function windowOnItsMaster(keyId: string): Promise<{ master: number; entries: number }> {
  const window = rateLimitWindowKey(prefix, keyId);
  const master = await cluster.masterOf(window);
  return { master, entries: await askNode(master, (redis) => redis.zcard(window)) };
}

/** 1 while the process's limiter counts on its own because Redis did not run its script, else 0. */
async function fallbackGauge(api: TestApi): Promise<number> {
  const gauge = (metricsOf.get(api) as ApiMetrics).registry.getSingleMetric('svc_api_rate_limiter_fallback');
  return (await gauge!.get()).values[0]!.value;
}

async function roleOf(port: number): Promise<string> {
  return askNode(port, async (redis) => ((await redis.role()) as unknown[])[0] as string);
}

describe('The per-key rate limit on a Redis Cluster', () => {
  it('is one exact count across two API processes: LIMIT answers, then 429 from both, and the window on its slot’s master holds LIMIT entries', async () => {
    const { key, keyId } = await seedAccount(a.db, ['read:webhooks']);
    const before = Date.now();

    const allowed = [];
    for (let i = 0; i < LIMIT; i++) allowed.push(await get(i % 2 === 0 ? a : b, key));
    const refusedByA = await get(a, key);
    const refusedByB = await get(b, key);
    const after = Date.now();

    expect(allowed.map((res) => res.status)).toEqual(Array(LIMIT).fill(200));
    expect(allowed.map((res) => res.headers['x-ratelimit-limit'])).toEqual(Array(LIMIT).fill(String(LIMIT)));
    expect(allowed.map((res) => Number(res.headers['x-ratelimit-remaining']))).toEqual(Array.from({ length: LIMIT }, (_, i) => LIMIT - 1 - i));
    const resets = new Set([...allowed, refusedByA, refusedByB].map((res) => Number(res.headers['x-ratelimit-reset'])));
    expect(resets.size).toBe(1); // every answer counts from the same oldest request, in both processes
    const [reset] = [...resets] as [number];
    expect(reset).toBeGreaterThanOrEqual(Math.floor(before / 1000) + 60);
    expect(reset).toBeLessThanOrEqual(Math.ceil(after / 1000) + 60);
    expectRateLimited(refusedByA);
    expectRateLimited(refusedByB);
    const window = await windowOnItsMaster(keyId);
    expect(window.entries).toBe(LIMIT);
    // The revocation marker the same script reads is in the same slot, so on the same master.
    expect(await cluster.masterOf(revokedKeyMarker(prefix, keyId))).toBe(window.master);
    expect([await fallbackGauge(a), await fallbackGauge(b)]).toEqual([0, 0]);
  });

  it('keeps each key’s window on the master of its own slot, so different keys’ windows spread over the masters', async () => {
    const { accountId } = await seedAccount(a.db, ['read:webhooks']);
    const keys = [];
    for (let i = 0; i < 12; i++) keys.push(await createApiKey(a.db, accountId, { name: `key ${i}`, scopes: ['read:webhooks'] }));

    const statuses = [];
    for (const [i, created] of keys.entries()) statuses.push((await get(i % 2 === 0 ? a : b, created.key)).status);

    expect(statuses).toEqual(Array(keys.length).fill(200));
    const windows = await Promise.all(keys.map((created) => windowOnItsMaster(created.id)));
    expect(windows.map((window) => window.entries)).toEqual(Array(keys.length).fill(1));
    // 12 random key ids all in one master's third of the slots: 3 × (1/3)^12, about 1 in 177,000.
    expect(new Set(windows.map((window) => window.master)).size).toBeGreaterThanOrEqual(2);
  });
});

describe('Revocation on a Redis Cluster', () => {
  // These test APIs hear nothing from Postgres (no LISTEN): the marker alone tells them.
  it('refuses a key with 401 in both API processes on their very next request once revokeApiKeyEverywhere set its marker on the key’s slot', async () => {
    const { key, keyId } = await seedAccount(a.db, ['read:webhooks']);
    const cachedByA = await get(a, key);
    const cachedByB = await get(b, key);

    await revokeApiKeyEverywhere({ db: a.db, redis: admin, prefix }, keyId);
    const nextViaA = await get(a, key);
    const nextViaB = await get(b, key);

    expect([cachedByA.status, cachedByB.status]).toEqual([200, 200]);
    for (const res of [nextViaA, nextViaB]) {
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: { code: 'invalid_key', message: expect.any(String) } });
    }
    const marker = revokedKeyMarker(prefix, keyId);
    const master = await cluster.masterOf(marker);
    expect(await askNode(master, (redis) => redis.get(marker))).toBe('1');
    const ttl = await askNode(master, (redis) => redis.ttl(marker));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(24 * 60 * 60);
    // Read by the shared script, beside the window: the two requests before counted there, the refused ones not.
    expect(await windowOnItsMaster(keyId)).toEqual({ master, entries: 2 });
    const row = await a.db('api_keys').where({ id: keyId }).first('revoked_at');
    expect(row.revoked_at).toBeInstanceOf(Date);
  });
});

describe('The API process (main.js) on a Redis Cluster', () => {
  let database: Awaited<ReturnType<typeof createIsolatedDatabase>> | undefined;
  let main: ChildProcess | undefined;
  afterAll(async () => {
    if (main && main.exitCode === null && main.signalCode === null) {
      main.kill('SIGKILL');
      await new Promise((resolve) => main!.once('exit', resolve));
    }
    await database?.drop();
  });

  it('starts with REDIS_CLUSTER_NODES, answers /readyz 200 with the cluster ok, counts a key on its slot’s master, and stops on SIGTERM with exit 0', async () => {
    database = await createIsolatedDatabase();
    const db = createDb(database.url, { poolMax: 2 });
    const { key, keyId } = await seedAccount(db, ['read:webhooks']).finally(() => db.destroy());
    const port = await freePort();
    const mainPrefix = `test-cluster-main-${uniqueTag()}`;
    let output = '';
    main = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: database.url,
        REDIS_CLUSTER_NODES: cluster.seeds,
        DISPATCHER_QUEUE_SHARDS: '3',
        QUEUE_PREFIX: mainPrefix,
        RATE_LIMIT_PER_MINUTE: String(LIMIT),
        PORT: String(port),
        METRICS_PORT: '0',
        LOG_LEVEL: 'warn',
        // Else it warns, rightly, that webhook secrets are stored in plain text: no warning is expected here.
        SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    main.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    main.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => main!.once('exit', (code, signal) => resolve({ code, signal })));

    const ready = await waitFor(
      async () => {
        const res = await httpGet(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        return res?.status === 200 && res;
      },
      30_000,
      `the API on ${port} to be ready: ${output}`,
    );
    const served = await fetch(`http://127.0.0.1:${port}/api/v1/webhooks`, { headers: bearer(key) });
    main.kill('SIGTERM');
    const exit = await exited;

    expect(JSON.parse(ready.text)).toEqual({
      status: 'ready',
      checks: { postgres: 'ok', redis: 'ok' },
      rateLimiter: 'shared',
      redisCluster: { state: 'ok', masters: 3, mastersAnswering: 3 },
    });
    expect(served.status).toBe(200);
    expect(served.headers.get('x-ratelimit-remaining')).toBe(String(LIMIT - 1));
    const window = rateLimitWindowKey(mainPrefix, keyId);
    expect(await askNode(await cluster.masterOf(window), (redis) => redis.zcard(window))).toBe(1);
    // Its output is shown if it did not stop cleanly. Not even "Redis is not answering; starting with the per-process rate limit".
    expect({ exit, output: exit.code === 0 ? '' : output }).toEqual({ exit: { code: 0, signal: null }, output: '' });
    expect(output).not.toMatch(/"level":"(warn|error)"/);
  });
});

describe('A master of the cluster dies (docs/operations.md, "Redis Cluster": a master fails)', () => {
  const healthy = { status: 'ready', checks: { postgres: 'ok', redis: 'ok' }, rateLimiter: 'shared', redisCluster: { state: 'ok', masters: 3, mastersAnswering: 3 } };

  /** What one process answered in a round: the doomed key, the spared key, the doomed key again, then its fallback gauge. */
  interface Round {
    doomed: request.Response[];
    spared: request.Response;
    /** The fallback gauge just after the spared key was counted in Redis, the doomed key's window still per process. */
    fallbackAfterSpared: number;
    fallback: number;
  }

  /**
   * Two new keys: `doomed`, whose window lives on a master that has a replica, and `spared`, on
   * another master. Kills the doomed key's master, and until its replica has taken over sends each
   * process a round (the doomed key, the spared key, the doomed key again), then asks both /readyz
   * twice.
   * A round counts as during the outage only if the replica was still a replica once all its
   * answers were in, so the dead master's slots were unserved throughout. Then waits until the
   * cluster is healthy and both processes are ready, and sends each the doomed key once more.
   */
  async function killMasterOfNewKey() {
    const { accountId } = await seedAccount(a.db, ['read:webhooks']);
    const newKey = (name: string) => createApiKey(a.db, accountId, { name, scopes: ['read:webhooks'] });
    const masterOfKey = (keyId: string) => cluster.masterOf(rateLimitWindowKey(prefix, keyId));
    let doomed = await newKey('doomed');
    while ((await replicasOf(await masterOfKey(doomed.id))).length !== 1) doomed = await newKey('doomed');
    const victim = await masterOfKey(doomed.id);
    let spared = await newKey('spared');
    while ((await masterOfKey(spared.id)) === victim) spared = await newKey('spared');
    const [replica] = (await replicasOf(victim)) as [number];
    // The outage lasts about the node timeout plus an election: 5 s leaves room for a few rounds
    // (a request on a slot the cluster refuses may take the limiter's whole 500 ms).
    await Promise.all(liveNodes().map((node) => askNode(node.port, (redis) => redis.config('SET', 'cluster-node-timeout', '5000'))));
    const readyBefore = await Promise.all([readyz(a), readyz(b)]);

    await cluster.kill(victim);
    const round = async (api: TestApi): Promise<Round> => {
      const first = await get(api, doomed.key);
      const spare = await get(api, spared.key);
      const fallbackAfterSpared = await fallbackGauge(api);
      const second = await get(api, doomed.key);
      return { doomed: [first, second], spared: spare, fallbackAfterSpared, fallback: await fallbackGauge(api) };
    };
    const outage: Array<{ viaA: Round; viaB: Round; ready: request.Response[] }> = [];
    await waitFor(
      async () => {
        const [viaA, viaB] = await Promise.all([round(a), round(b)]);
        // Each process probed twice in a row, as a load balancer's and an orchestrator's probes may be.
        const ready = [...(await Promise.all([readyz(a), readyz(b)])), ...(await Promise.all([readyz(a), readyz(b)]))];
        if ((await roleOf(replica)) === 'master') return true;
        outage.push({ viaA, viaB, ready });
        return false;
      },
      30_000,
      `the replica ${replica} of the killed master ${victim} to take over`,
    );
    await cluster.waitUntilHealthy();
    const readyAgain = await waitFor(
      async () => {
        const answers = await Promise.all([readyz(a), readyz(b)]);
        return answers.every((res) => res.status === 200) && answers;
      },
      15_000,
      'both processes to be ready again',
    );
    const afterViaA = await get(a, doomed.key);
    const afterViaB = await get(b, doomed.key);
    return { doomed, replica, readyBefore, outage, readyAgain, afterViaA, afterViaB };
  }

  const liveNodes = () => cluster.nodes.filter((node) => node.process.exitCode === null && node.process.signalCode === null);

  /** The replicas a master has now (ports). */
  async function replicasOf(master: number): Promise<number[]> {
    const role = await askNode(master, (redis) => redis.role() as Promise<unknown[]>);
    return (role[2] as Array<[string, string, string]>).map(([, port]) => Number(port));
  }

  /** What holds after any of these stories once the replica took over: both ready, the doomed key shared again on the replica. */
  async function expectRecovered(story: Awaited<ReturnType<typeof killMasterOfNewKey>>): Promise<void> {
    expect(story.readyAgain.map((res) => res.body)).toEqual([healthy, healthy]);
    // B's answer counts A's request. (How many entries the window had before is not fixed: ioredis
    // retries a command the limiter gave up on for a few seconds, and one that lands once the
    // replica took over is counted there.)
    expect([story.afterViaA.status, story.afterViaB.status]).toEqual([200, 200]);
    expect(Number(story.afterViaB.headers['x-ratelimit-remaining'])).toBeLessThan(Number(story.afterViaA.headers['x-ratelimit-remaining']));
    const window = await windowOnItsMaster(story.doomed.id);
    expect(window.master).toBe(story.replica);
    expect(window.entries).toBeGreaterThanOrEqual(LIMIT - Number(story.afterViaB.headers['x-ratelimit-remaining']));
    expect([await fallbackGauge(a), await fallbackGauge(b)]).toEqual([0, 0]);
  }

  /** Each process counted the doomed key on its own, from LIMIT - 1, unaware of the other, whatever was answered in between. */
  function expectCountedPerProcess(outage: Array<{ viaA: Round; viaB: Round }>): void {
    const expected = outage.flatMap((_, i) => [String(LIMIT - 1 - 2 * i), String(LIMIT - 2 - 2 * i)]);
    expect(outage.flatMap((round) => round.viaA.doomed.map((res) => res.headers['x-ratelimit-remaining']))).toEqual(expected);
    expect(outage.flatMap((round) => round.viaB.doomed.map((res) => res.headers['x-ratelimit-remaining']))).toEqual(expected);
  }

  it('answers /readyz 503 naming the cluster until its replica takes over, answers every customer (no 5xx; the keys on that master limited per process), then is ready and shared again', async () => {
    const story = await killMasterOfNewKey();

    expect(story.readyBefore.map((res) => [res.status, res.body])).toEqual([
      [200, healthy],
      [200, healthy],
    ]);
    expect(story.outage.length).toBeGreaterThan(0);
    for (const round of story.outage) {
      for (const res of round.ready) {
        expect(res.status).toBe(503);
        expect(res.body).toMatchObject({ status: 'not_ready', checks: { postgres: 'ok', redis: 'down' } });
        const seen = res.body.redisCluster as { state: string; masters: number; mastersAnswering: number };
        expect(seen.state !== 'ok' || seen.mastersAnswering < seen.masters).toBe(true);
        expect(res.body.reasons).toContainEqual(expect.stringMatching(/^the Redis Cluster is not ready: cluster_state (ok|fail)/));
      }
      // With Redis's default cluster-require-full-coverage, every master refuses commands
      // (CLUSTERDOWN) once the dead one is marked failed: the spared key may be counted per
      // process too. Either way, no 5xx.
      for (const seen of [round.viaA, round.viaB]) {
        expect([...seen.doomed, seen.spared].map((res) => res.status)).toEqual([200, 200, 200]);
        expect(seen.fallback).toBe(1);
      }
    }
    expectCountedPerProcess(story.outage);
    await expectRecovered(story);
  }, 60_000);

  it('with cluster-require-full-coverage no, keeps the other masters’ keys shared meanwhile, while the dead master’s keys keep their per-process counts and /readyz still says 503 (2 of 3 masters answer)', async () => {
    await Promise.all(liveNodes().map((node) => askNode(node.port, (redis) => redis.config('SET', 'cluster-require-full-coverage', 'no'))));

    const story = await killMasterOfNewKey();

    expect(story.readyBefore.map((res) => res.status)).toEqual([200, 200]);
    expect(story.outage.length).toBeGreaterThan(0);
    for (const round of story.outage) {
      for (const res of round.ready) {
        expect(res.status).toBe(503);
        // The cluster itself says ok (the slots left are served): the dead master is seen as one not answering.
        expect(res.body.redisCluster).toEqual({ state: 'ok', masters: 3, mastersAnswering: 2 });
        expect(res.body.reasons).toContainEqual('the Redis Cluster is not ready: cluster_state ok, 1 of 3 masters do not answer');
      }
      for (const seen of [round.viaA, round.viaB]) {
        expect([...seen.doomed, seen.spared].map((res) => res.status)).toEqual([200, 200, 200]);
        expect(seen.fallback).toBe(1);
        // A key answered by a live master does not end the fallback while another key is still counted per process.
        expect(seen.fallbackAfterSpared).toBe(1);
      }
    }
    // The spared key stayed shared all along: A's and B's answers count down one window.
    const spared = story.outage.flatMap((round) => [round.viaA.spared, round.viaB.spared].map((res) => Number(res.headers['x-ratelimit-remaining'])));
    expect([...spared].sort((x, y) => y - x)).toEqual(spared.map((_, i) => LIMIT - 1 - i));
    expectCountedPerProcess(story.outage);
    await expectRecovered(story);
  }, 60_000);
});
