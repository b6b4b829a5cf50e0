import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { buildEventBody, completeAiMonitorRun, completeScan, deliveryJobId, deployPowerUp } from '@svc/core';
import { PRODUCER_FAN_OUT_MAX } from '@svc/core/dispatcher';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf } from './support/delivery-probe.js';

/** ADR 11: producer calls a process makes together, of any kind, share one statement, one commit and one Redis round trip. */
describe('producer calls made together', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  /** The transaction that wrote each row (rows written by one commit share it). */
  async function writers(table: string, ids: string[]): Promise<string[]> {
    const { rows } = await h.db.raw(`SELECT xmin::text AS xid FROM ${table} WHERE id = ANY(?)`, [ids]);
    return [...new Set((rows as Array<{ xid: string }>).map((row) => row.xid))];
  }

  it('share one commit, yet each call answers only for itself: its own fact, event, deliveries and first attempt', async () => {
    const subscribed = await seedTenant(h);
    const sub = await subscribed.subscribe('/ok/batched', ['power_up.deployed', 'scan.completed']);
    const quiet = await seedTenant(h);
    const scanId = (await subscribed.newScan()).id;

    const calls = await Promise.allSettled([
      ...Array.from({ length: 6 }, (_, i) => deployPowerUp(producerOf(h), { siteId: subscribed.site.id, powerUpId: `pu-${i}` })),
      deployPowerUp(producerOf(h), { siteId: 'site_missing', powerUpId: 'pu-missing' }),
      completeScan(producerOf(h), { scanId, score: 61 }),
      completeScan(producerOf(h), { scanId, score: 62 }),
      ...Array.from({ length: 3 }, (_, i) => completeAiMonitorRun(producerOf(h), { siteId: quiet.site.id, compositeScore: 10 + i })),
    ]);

    const deployed = calls.slice(0, 6).map((call) => (call as PromiseFulfilledResult<Awaited<ReturnType<typeof deployPowerUp>>>).value);
    expect(calls.slice(0, 6).every((call) => call.status === 'fulfilled')).toBe(true);
    expect(deployed.map((d) => d.deployment.powerUpId)).toEqual(['pu-0', 'pu-1', 'pu-2', 'pu-3', 'pu-4', 'pu-5']);
    expect(new Set(deployed.map((d) => d.eventId)).size).toBe(6);
    expect(calls[6]).toMatchObject({ status: 'rejected', reason: { code: 'not_found' } });
    // The same scan twice: never in one batch; the first completes it, the second finds it completed.
    expect(calls[7]).toMatchObject({ status: 'fulfilled', value: { scan: { id: scanId, status: 'completed', score: 61 } } });
    expect(calls[8]).toMatchObject({ status: 'rejected', reason: { code: 'conflict' } });
    expect(calls.slice(9).every((call) => call.status === 'fulfilled')).toBe(true);

    // One commit for the six deployments, the scan, the three runs and their events, whatever
    // their kinds (the calls were made in one turn of the loop; ADR 11).
    const eventIds = deployed.map((d) => d.eventId);
    const scanned = (calls[7] as PromiseFulfilledResult<Awaited<ReturnType<typeof completeScan>>>).value;
    const runs = calls.slice(9).map((call) => (call as PromiseFulfilledResult<Awaited<ReturnType<typeof completeAiMonitorRun>>>).value);
    const oneCommit = await writers('events', [...eventIds, scanned.eventId, ...runs.map((r) => r.eventId)]);
    expect(oneCommit).toHaveLength(1);
    expect(await writers('power_up_deployments', deployed.map((d) => d.deployment.id))).toEqual(oneCommit);
    expect(await writers('ai_monitor_runs', runs.map((r) => r.run.id))).toEqual(oneCommit);
    // The scan was completed by that commit; the second call's later batch found it completed and wrote nothing.
    expect(await writers('scans', [scanId])).toEqual(oneCommit);
    expect(runs.map((r) => r.run.compositeScore)).toEqual([10, 11, 12]);
    // Each event: its own body and exactly one delivery to the subscription, its first attempt queued.
    const events = await h.db('events').whereIn('id', eventIds).select('id', 'body', 'created_at', 'fanned_out_at');
    for (const d of deployed) {
      const event = events.find((row) => row.id === d.eventId)!;
      expect(event.body).toBe(buildEventBody('power_up.deployed', event.created_at, { deploymentId: d.deployment.id, siteId: subscribed.site.id, powerUpId: d.deployment.powerUpId }));
      expect(event.fanned_out_at).toEqual(event.created_at);
    }
    const deliveries = await h.db('deliveries').whereIn('event_id', eventIds).select('id', 'event_id', 'subscription_id', 'status', 'attempt_count');
    expect(deliveries.map((row) => row.event_id).sort()).toEqual([...eventIds].sort());
    expect(deliveries.every((row) => row.subscription_id === sub.id && row.status === 'pending' && row.attempt_count === 0)).toBe(true);
    const jobs = await Promise.all(deliveries.map((row) => h.queues.deliveries[0]!.getJob(deliveryJobId(row.id, 1))));
    expect(jobs.map((job) => job?.data.deliveryId).sort()).toEqual(deliveries.map((row) => row.id).sort());
    // Nothing written for the missing site; the quiet tenant's runs have events but nothing to deliver.
    expect(await h.db('power_up_deployments').where({ site_id: 'site_missing' })).toEqual([]);
    const quietEvents = await h.db('events').where({ account_id: quiet.accountId }).select('id');
    expect(quietEvents).toHaveLength(3);
    expect(await h.db('deliveries').whereIn('event_id', quietEvents.map((row) => row.id))).toEqual([]);
  });

  it('keep each event’s fan-out to its own account, and leave only the too-wide one to the fan-out job', async () => {
    const wide = await seedTenant(h);
    for (let i = 0; i <= PRODUCER_FAN_OUT_MAX; i += 1) await wide.subscribe(`/ok/wide-batch-${i}`, ['power_up.deployed']);
    const narrow = await seedTenant(h);
    const narrowSub = await narrow.subscribe('/ok/narrow-batch', ['power_up.deployed']);

    const [w, n] = await Promise.all([
      deployPowerUp(producerOf(h), { siteId: wide.site.id, powerUpId: 'pu-wide' }),
      deployPowerUp(producerOf(h), { siteId: narrow.site.id, powerUpId: 'pu-narrow' }),
    ]);

    expect(await writers('events', [w.eventId, n.eventId])).toHaveLength(1);
    expect(await h.db('events').where({ id: w.eventId }).first('fanned_out_at')).toEqual({ fanned_out_at: null });
    expect(await h.db('deliveries').where({ event_id: w.eventId })).toEqual([]);
    expect(await h.queues.fanout.getJob(w.eventId)).toBeDefined();
    const narrowDeliveries = await h.db('deliveries').where({ event_id: n.eventId }).select('subscription_id');
    expect(narrowDeliveries).toEqual([{ subscription_id: narrowSub.id }]);
  });
});
