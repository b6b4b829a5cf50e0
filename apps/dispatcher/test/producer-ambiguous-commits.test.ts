import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  completeAiMonitorRun,
  completeScan,
  ConflictError,
  createDb,
  createQueues,
  createRedis,
  deliveryJobId,
  deployPowerUp,
  type Db,
  type ProducerDeps,
} from '@svc/core';
import { createCapturingLogger, startTcpProxy, type TcpProxy } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

/** The prefix of the name the producers' one statement is prepared under (producer-statements.ts). */
const PRODUCER_STATEMENT = 'svc_produce_';

/**
 * A producer's connection can be lost after Postgres committed its statement (a restart, a
 * failover, a pooler restart): the call cannot know, and its retry must not record the fact and
 * its event a second time.
 */
describe('producer calls whose commit is ambiguous', () => {
  let h: Harness;
  let proxy: TcpProxy;
  let proxied: Db;
  let throughProxy: ProducerDeps;

  beforeAll(async () => {
    h = await createHarness();
    proxy = await startTcpProxy('127.0.0.1', Number(new URL(h.config.databaseUrl).port || 5432));
    const url = new URL(h.config.databaseUrl);
    url.port = String(proxy.port);
    // The pool reports the connection the proxy cuts; that is the point, not news.
    proxied = createDb(url.toString(), { poolMax: 10, log: () => undefined });
    throughProxy = { db: proxied, queues: h.queues };
  });
  afterAll(async () => {
    await proxied.destroy();
    await proxy.close();
    await h.close();
  });

  /** The transactions that wrote these rows (rows written by one commit share one). */
  async function writers(table: string, ids: string[]): Promise<string[]> {
    const { rows } = await h.db.raw(`SELECT DISTINCT xmin::text AS xid FROM ${table} WHERE id = ANY(?)`, [ids]);
    return (rows as Array<{ xid: string }>).map((row) => row.xid);
  }

  it('records each call of a batch once when the connection is cut right after its COMMIT, and answers each with what was recorded', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/ok/ambiguous', ['*']);
    const scan = await tenant.newScan();
    const cutsBefore = proxy.cuts;
    proxy.cutAfterCommitOf(PRODUCER_STATEMENT);

    // Made in one turn of the loop: one batch, one statement, on the connection the proxy cuts.
    const calls = await Promise.allSettled([
      deployPowerUp(throughProxy, { siteId: tenant.site.id, powerUpId: 'pu-a' }),
      deployPowerUp(throughProxy, { siteId: tenant.site.id, powerUpId: 'pu-b' }),
      deployPowerUp(throughProxy, { siteId: tenant.site.id, powerUpId: 'pu-c' }),
      completeAiMonitorRun(throughProxy, { siteId: tenant.site.id, compositeScore: 71 }),
      completeAiMonitorRun(throughProxy, { siteId: tenant.site.id, compositeScore: 72 }),
      completeScan(throughProxy, { scanId: scan.id, score: 88 }),
    ]);

    expect(proxy.cuts).toBe(cutsBefore + 1);
    expect(calls.map((call) => call.status)).toEqual(Array(6).fill('fulfilled'));
    const [d1, d2, d3, r1, r2, s] = calls.map((call) => (call as PromiseFulfilledResult<{ eventId: string }>).value) as [
      Awaited<ReturnType<typeof deployPowerUp>>,
      Awaited<ReturnType<typeof deployPowerUp>>,
      Awaited<ReturnType<typeof deployPowerUp>>,
      Awaited<ReturnType<typeof completeAiMonitorRun>>,
      Awaited<ReturnType<typeof completeAiMonitorRun>>,
      Awaited<ReturnType<typeof completeScan>>,
    ];
    expect([d1, d2, d3].map((d) => d.deployment.powerUpId)).toEqual(['pu-a', 'pu-b', 'pu-c']);
    expect([r1, r2].map((r) => r.run.compositeScore)).toEqual([71, 72]);
    expect(s.scan).toMatchObject({ id: scan.id, status: 'completed', score: 88 });
    const eventIds = [d1, d2, d3, r1, r2, s].map((answer) => answer.eventId);
    expect(new Set(eventIds).size).toBe(6);

    // One fact per call: the ones the calls answered.
    const deployments = await h.db('power_up_deployments').where({ site_id: tenant.site.id }).select('id');
    expect(deployments.map((row) => row.id).sort()).toEqual([d1, d2, d3].map((d) => d.deployment.id).sort());
    const runs = await h.db('ai_monitor_runs').where({ site_id: tenant.site.id }).select('id');
    expect(runs.map((row) => row.id).sort()).toEqual([r1, r2].map((r) => r.run.id).sort());
    expect(await h.db('scans').where({ id: scan.id }).first('status', 'score')).toEqual({ status: 'completed', score: 88 });
    // One event per call, the one it answered, all from the commit whose answer was lost.
    const events = await h.db('events').where({ account_id: tenant.accountId }).select('id');
    expect(events.map((row) => row.id).sort()).toEqual([...eventIds].sort());
    expect(await writers('events', eventIds)).toHaveLength(1);
    expect(await writers('power_up_deployments', [d1, d2, d3].map((d) => d.deployment.id))).toEqual(await writers('events', eventIds));
    // One delivery per event to the subscription, its first attempt queued by the retry.
    const deliveries = await h.db('deliveries').whereIn('event_id', eventIds).select('id', 'event_id', 'subscription_id', 'status');
    expect(deliveries.map((row) => row.event_id).sort()).toEqual([...eventIds].sort());
    expect(deliveries.every((row) => row.subscription_id === sub.id && row.status === 'pending')).toBe(true);
    const jobs = await Promise.all(deliveries.map((row) => h.queues.deliveries[0]!.getJob(deliveryJobId(row.id, 1))));
    expect(jobs.map((job) => job?.data.deliveryId).sort()).toEqual(deliveries.map((row) => row.id).sort());
  });

  it('lets a producer in another service retry a lost call with its idempotency key: the same fact and event are answered, nothing is written twice', async () => {
    const tenant = await seedTenant(h);
    const scan = await tenant.newScan();
    const deployKey = `deployer:job-${tenant.site.id}`;
    const scanKey = `scanner:${scan.id}`;
    proxy.cutAfterCommitOf(PRODUCER_STATEMENT);

    // A call alone is not retried by the batcher: the producer sees the connection error.
    await expect(deployPowerUp(throughProxy, { siteId: tenant.site.id, powerUpId: 'pu-keyed', idempotencyKey: deployKey })).rejects.toThrow();
    // Its retry, from another process (its own pool, so its own batches), with the same key.
    const elsewhere = createDb(h.config.databaseUrl, { poolMax: 2 });
    try {
      const other: ProducerDeps = { db: elsewhere, queues: h.queues };
      const retried = await deployPowerUp(other, { siteId: tenant.site.id, powerUpId: 'pu-keyed', idempotencyKey: deployKey });
      const again = await deployPowerUp(other, { siteId: tenant.site.id, powerUpId: 'pu-keyed', idempotencyKey: deployKey });
      expect(again).toEqual(retried);
      const deployments = await h.db('power_up_deployments').where({ site_id: tenant.site.id }).select('id');
      expect(deployments).toEqual([{ id: retried.deployment.id }]);
      const events = await h.db('events').where({ account_id: tenant.accountId }).select('id', 'idempotency_key');
      expect(events).toEqual([{ id: retried.eventId, idempotency_key: deployKey }]);

      // A scan whose completion was recorded: its retry answers the completed scan, not a conflict.
      const completed = await completeScan(other, { scanId: scan.id, score: 64, idempotencyKey: scanKey });
      expect(await completeScan(other, { scanId: scan.id, score: 64, idempotencyKey: scanKey })).toEqual(completed);
      await expect(completeScan(other, { scanId: scan.id, score: 64 })).rejects.toMatchObject({ code: 'conflict', message: expect.stringContaining('not running') });

      // The key used for another call: refused, and nothing of the recorded call is shown.
      const stranger = await seedTenant(h);
      const reused = deployPowerUp(other, { siteId: stranger.site.id, powerUpId: 'pu-keyed', idempotencyKey: deployKey });
      await expect(reused).rejects.toBeInstanceOf(ConflictError);
      await expect(reused).rejects.toMatchObject({ message: `idempotency key "${deployKey}" was already used for another call` });
      await expect(deployPowerUp(other, { siteId: tenant.site.id, powerUpId: 'pu-other', idempotencyKey: deployKey })).rejects.toMatchObject({ code: 'conflict' });
      await expect(completeScan(other, { scanId: scan.id, score: 65, idempotencyKey: scanKey })).rejects.toMatchObject({ code: 'conflict' });
      expect(await h.db('power_up_deployments').where({ site_id: stranger.site.id })).toEqual([]);
      expect(await h.db('events').where({ account_id: stranger.accountId })).toEqual([]);
      expect(await h.db('events').where({ account_id: tenant.accountId }).count({ n: '*' })).toEqual([{ n: '2' }]);
    } finally {
      await elsewhere.destroy();
    }
  });

  it('records one fact when two calls with the same key are made together, and answers both with it', async () => {
    const tenant = await seedTenant(h);
    const key = `monitor:twin-${tenant.site.id}`;

    const [a, b] = await Promise.all([
      completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, compositeScore: 40, idempotencyKey: key }),
      completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, compositeScore: 40, idempotencyKey: key }),
    ]);

    expect(b).toEqual(a);
    expect(await h.db('ai_monitor_runs').where({ site_id: tenant.site.id }).select('id')).toEqual([{ id: a.run.id }]);
    expect(await h.db('events').where({ account_id: tenant.accountId }).select('id')).toEqual([{ id: a.eventId }]);
  });

  it('refuses a malformed idempotency key before writing anything', async () => {
    const tenant = await seedTenant(h);
    await expect(deployPowerUp({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, powerUpId: 'pu-x', idempotencyKey: 'has a space' })).rejects.toMatchObject({
      code: 'invalid_input',
    });
    await expect(deployPowerUp({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, powerUpId: 'pu-x', idempotencyKey: '' })).rejects.toMatchObject({ code: 'invalid_input' });
    expect(await h.db('power_up_deployments').where({ site_id: tenant.site.id })).toEqual([]);
  });
});

describe('producer calls made with a logger of their own each', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it('share one batch whatever their loggers (no batcher left behind per logger)', async () => {
    const tenant = await seedTenant(h);
    const { logger } = createCapturingLogger('warn');

    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => completeAiMonitorRun({ db: h.db, queues: h.queues, logger: logger.child({ call: i }) }, { siteId: tenant.site.id, compositeScore: i })),
    );

    const { rows } = await h.db.raw('SELECT DISTINCT xmin::text AS xid FROM events WHERE id = ANY(?)', [answers.map((a) => a.eventId)]);
    expect(rows).toHaveLength(1);
    expect(await h.db('ai_monitor_runs').where({ site_id: tenant.site.id }).count({ n: '*' })).toEqual([{ n: '20' }]);
  });

  it('warn about a failed enqueue on the logger of the call whose event it was', async () => {
    const tenant = await seedTenant(h);
    await tenant.subscribe('/ok/logger', ['*']);
    const { logger, entries } = createCapturingLogger('warn');
    // Queues on a Redis connection that is closed: every enqueue fails at once.
    const redis = createRedis(h.config, 'bullmq');
    const closed = createQueues(redis, h.config.queuePrefix, 1);
    await closed.close();
    redis.disconnect();

    const [first, second] = await Promise.all(
      ['first', 'second'].map((call) => deployPowerUp({ db: h.db, queues: closed, logger: logger.child({ call }) }, { siteId: tenant.site.id, powerUpId: `pu-${call}` })),
    );

    const warnings = entries.filter((entry) => entry.level === 'warn').map((entry) => ({ call: entry.call, eventId: entry.eventId, message: entry.message }));
    expect(warnings.sort((x, y) => String(x.call).localeCompare(String(y.call)))).toEqual([
      { call: 'first', eventId: first!.eventId, message: 'event enqueue failed; the dispatcher sweep will fan it out' },
      { call: 'second', eventId: second!.eventId, message: 'event enqueue failed; the dispatcher sweep will fan it out' },
    ]);
  });
});
