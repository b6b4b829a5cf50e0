import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { deliveryJobId, deliveryQueueName, revokedKeyMarker, shardOf } from '@svc/core';
import { askNode, freePort, seedAccount, TestRedisCluster, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, waitForDelivery, type Harness } from '@svc/dispatcher/test-support';
import { runSvcJson } from './support.js';

const run = promisify(execFile);
/** The committed shim npm links as `svc` (this file runs from dist/test). */
const BIN = fileURLToPath(new URL('../../bin/svc.js', import.meta.url));
/** Long enough for a cold start; a process kept alive by an open cluster connection would hit it. */
const EXIT_TIMEOUT_MS = 20_000;
const SHARDS = 3;

/**
 * `svc` on a real Redis Cluster (3 masters, 3 replicas, redis-server processes of this file), with
 * the delivery queue in DISPATCHER_QUEUE_SHARDS=3 shards, as docs/operations.md ("Redis Cluster")
 * sets it up; the dispatcher harness's database and queue prefix, and its receiver.
 */
let cluster: TestRedisCluster;
let h: Harness;
/** The environment `svc` runs with: the cluster's variables and no REDIS_URL. */
let env: Record<string, string>;

beforeAll(async () => {
  cluster = await new TestRedisCluster().start();
  // The sweep runs at a dispatcher's start and then every minute: a job found on its shard was queued by svc.
  h = await createHarness({ REDIS_CLUSTER_NODES: cluster.seeds, DISPATCHER_QUEUE_SHARDS: String(SHARDS), DISPATCHER_SWEEP_INTERVAL_MS: '60000' });
  env = {
    DATABASE_URL: h.config.databaseUrl,
    REDIS_CLUSTER_NODES: cluster.seeds,
    DISPATCHER_QUEUE_SHARDS: String(SHARDS),
    QUEUE_PREFIX: h.config.queuePrefix,
    LOG_LEVEL: 'error',
  };
}, 60_000);

afterAll(async () => {
  await h?.close();
  await cluster?.stop();
});

/** Runs the real `svc` bin as a child process with exactly this environment (and PATH). */
function svcBin(args: string[], extra: Record<string, string> = env) {
  return run(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH, ...extra }, timeout: EXIT_TIMEOUT_MS });
}

/** The job's hash as the master serving its queue's slot holds it (asked directly: another node would answer MOVED). */
async function jobOnItsMaster(queueName: string, jobId: string): Promise<{ master: number; data: unknown }> {
  const key = `${h.config.queuePrefix}:${queueName}:${jobId}`;
  const master = await cluster.masterOf(key);
  const data = await askNode(master, (redis) => redis.hget(key, 'data'));
  return { master, data: data === null ? null : JSON.parse(data) };
}

describe('svc on a Redis Cluster with DISPATCHER_QUEUE_SHARDS=3', () => {
  it('puts the three delivery shards on the three masters, and every queue’s scripts run there (one slot per queue)', async () => {
    const masters = await Promise.all(Array.from({ length: SHARDS }, (_, shard) => cluster.masterOf(deliveryQueueName(shard, SHARDS))));
    // BullMQ's count script reads several keys of its queue: a cluster refuses it (CROSSSLOT) unless they share a slot.
    const counts = await Promise.all([h.queues.fanout, ...h.queues.deliveries].map((queue) => queue.getJobCounts('waiting', 'delayed')));

    expect(new Set(masters).size).toBe(SHARDS);
    expect(new Set(masters)).toEqual(new Set(await cluster.masterPorts()));
    expect(counts).toEqual(Array(SHARDS + 1).fill(expect.objectContaining({ waiting: 0, delayed: 0 })));
  });

  it('svc scans complete (the real bin) queues the first attempt on its subscription’s shard, on that shard’s master, and ends by itself; a dispatcher then delivers it', async () => {
    const { site, subscribe } = await seedTenant(h);
    const subscription = await subscribe('/cluster');
    const started = await svcBin(['scans', 'start', '--site', site.id, '--json']);
    const scanId = (JSON.parse(started.stdout) as { id: string }).id;

    const completed = await svcBin(['scans', 'complete', scanId, '--score', '91', '--json']);

    expect(completed.stderr).toBe('');
    const { eventId } = JSON.parse(completed.stdout) as { eventId: string };
    const delivery = await h.db('deliveries').where({ event_id: eventId, subscription_id: subscription.id }).first('id', 'status');
    expect(delivery).toMatchObject({ status: 'pending' });
    const jobId = deliveryJobId(delivery.id, 1);
    const shard = shardOf(subscription.id, SHARDS);
    const onShards = await Promise.all(h.queues.deliveries.map(async (queue) => (await queue.getJob(jobId))?.data ?? null));
    expect(onShards).toEqual(onShards.map((_, k) => (k === shard ? { deliveryId: delivery.id, subscriptionId: subscription.id, attempt: 1 } : null)));
    expect(await h.queues.deliveries[shard]!.getJobState(jobId)).toBe('waiting');
    const job = await jobOnItsMaster(deliveryQueueName(shard, SHARDS), jobId);
    expect(job).toEqual({ master: await cluster.masterOf(deliveryQueueName(shard, SHARDS)), data: { deliveryId: delivery.id, subscriptionId: subscription.id, attempt: 1 } });

    h.startDispatcher();
    const delivered = await waitForDelivery(h, eventId, subscription.id, (row) => row.status !== 'pending', 'the first attempt to be made');
    expect(delivered).toMatchObject({ status: 'delivered', attempt_count: 1 });
    const received = h.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === delivery.id);
    expect(received.map((request) => request.path)).toEqual(['/cluster']);
  });

  it('svc deliveries redeliver queues the new delivery on the same shard and svc deliveries list shows both delivered', async () => {
    const { site, subscribe } = await seedTenant(h);
    const subscription = await subscribe('/again');
    const scanId = (await runSvcJson<{ id: string }>(['scans', 'start', '--site', site.id], env)).id;
    const { eventId } = await runSvcJson<{ eventId: string }>(['scans', 'complete', scanId, '--score', '70'], env);
    if (h.dispatchers.length === 0) h.startDispatcher();
    const first = await waitForDelivery(h, eventId, subscription.id, (row) => row.status === 'delivered', 'the first delivery');

    const again = await runSvcJson<{ id: string; redeliveryOf: string; status: string }>(['deliveries', 'redeliver', first.id], env);
    await waitFor(async () => (await h.db('deliveries').where({ id: again.id }).first('status'))?.status === 'delivered', 10_000, 'the redelivery to be delivered');
    const listed = await runSvcJson<{ deliveries: Array<{ id: string; status: string; redeliveryOf: string | null; attempts: Array<{ n: number; statusCode: number }> }> }>(
      ['deliveries', 'list', '--subscription', subscription.id],
      env,
    );

    expect(again).toMatchObject({ redeliveryOf: first.id, status: 'pending' });
    expect(listed.deliveries.map((entry) => ({ id: entry.id, status: entry.status, redeliveryOf: entry.redeliveryOf, attempts: entry.attempts.map((attempt) => [attempt.n, attempt.statusCode]) }))).toEqual([
      { id: again.id, status: 'delivered', redeliveryOf: first.id, attempts: [[1, 200]] },
      { id: first.id, status: 'delivered', redeliveryOf: null, attempts: [[1, 200]] },
    ]);
    const received = h.receiver.requests.filter((request) => request.path === '/again').map((request) => request.headers['x-service-delivery-id']);
    expect(received).toEqual([first.id, again.id]);
  });

  it('svc keys revoke (the real bin) sets the key’s revocation marker on the master of its slot and ends by itself', async () => {
    const { keyId } = await seedAccount(h.db, ['read:webhooks']);

    const { stdout, stderr } = await svcBin(['keys', 'revoke', keyId, '--json']);

    expect(stderr).toBe('');
    expect(JSON.parse(stdout)).toEqual({ id: keyId, revokedAt: expect.any(String) });
    const marker = revokedKeyMarker(h.config.queuePrefix, keyId);
    const master = await cluster.masterOf(marker);
    expect(await askNode(master, (redis) => redis.get(marker))).toBe('1');
    expect(await askNode(master, (redis) => redis.ttl(marker))).toBeGreaterThan(0);
    expect((await h.db('api_keys').where({ id: keyId }).first('revoked_at')).revoked_at).toBeInstanceOf(Date);
  });

  it('svc scans complete (the real bin) with no cluster node answering still records the scan, its event and its delivery, warns that the sweep will queue it, and exits 0 by itself', async () => {
    const { site, subscribe } = await seedTenant(h);
    const subscription = await subscribe('/away');
    const scanId = (await runSvcJson<{ id: string }>(['scans', 'start', '--site', site.id], env)).id;
    const away = { ...env, REDIS_CLUSTER_NODES: `127.0.0.1:${await freePort()}`, LOG_LEVEL: 'warn' };

    const completed = await svcBin(['scans', 'complete', scanId, '--score', '40', '--json'], away);

    const out = JSON.parse(completed.stdout) as { eventId: string; status: string };
    expect(out.status).toBe('completed');
    const warnings = completed.stderr.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(warnings).toEqual([expect.objectContaining({ level: 'warn', service: 'svc', eventId: out.eventId, message: expect.stringMatching(/enqueue failed; the dispatcher sweep/) })]);
    expect(await h.db('deliveries').where({ event_id: out.eventId }).select('subscription_id', 'status', 'attempt_count')).toEqual([
      { subscription_id: subscription.id, status: 'pending', attempt_count: 0 },
    ]);
  });

  it('refuses REDIS_CLUSTER_NODES beside REDIS_URL: exit 2, one line naming both variables and neither value, nothing done', async () => {
    const { keyId } = await seedAccount(h.db, ['read:webhooks']);
    const mixed = { ...env, REDIS_URL: 'redis://:hunter2@cache.example:6379' };

    const failure = await svcBin(['keys', 'revoke', keyId], mixed).then(
      () => undefined,
      (error: { code: number; stdout: string; stderr: string }) => error,
    );

    expect(failure).toMatchObject({ code: 2, stdout: '' });
    const lines = failure!.stderr.split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe('');
    expect(lines[0]).toMatch(/^svc: error: invalid configuration: REDIS_CLUSTER_NODES and REDIS_URL are both set/);
    expect(lines[0]).not.toContain('hunter2');
    expect(lines[0]).not.toContain(cluster.seeds.split(',')[0]);
    expect((await h.db('api_keys').where({ id: keyId }).first('revoked_at')).revoked_at).toBeNull();
  });
});
