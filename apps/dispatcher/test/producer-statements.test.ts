import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, completeScan, deployPowerUp, insertEvent } from '@svc/core';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf, specEnvelope } from './support/delivery-probe.js';

/** Issue 13: each producer writes its fact and its event in one statement (one per kind), the body assembled by Postgres. */
describe('a producer recording its fact and event in one statement', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it('stores exactly the bytes JSON.stringify gives, even for a domain that needs escaping', async () => {
    const tenant = await seedTenant(h);
    // Domains are normalized on creation; this one is written directly, to test the escaping itself.
    const domain = 'a"b\\c\n\u0001é☃\u2028.example';
    await h.db('sites').where({ id: tenant.site.id }).update({ domain });

    const ai = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 72.25 });
    const scan = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 87.5 });
    const deployed = await deployPowerUp(producerOf(h), { siteId: tenant.site.id, powerUpId: 'pu "x" \\u0000 ☃' });

    const rows = await h.db('events').whereIn('id', [ai.eventId, scan.eventId, deployed.eventId]).select('id', 'account_id', 'type', 'body', 'created_at');
    const byId = new Map(rows.map((row) => [row.id as string, row]));
    const aiRow = byId.get(ai.eventId)!;
    const scanRow = byId.get(scan.eventId)!;
    const deployRow = byId.get(deployed.eventId)!;
    expect(aiRow.body).toBe(
      specEnvelope('ai_check.completed', aiRow.created_at, { runId: ai.run.id, siteId: tenant.site.id, domain, compositeScore: 72.25 }),
    );
    expect(scanRow.body).toBe(
      specEnvelope('scan.completed', scanRow.created_at, { scanId: scan.scan.id, siteId: tenant.site.id, domain, score: 87.5 }),
    );
    expect(deployRow.body).toBe(
      specEnvelope('power_up.deployed', deployRow.created_at, { deploymentId: deployed.deployment.id, siteId: tenant.site.id, powerUpId: 'pu "x" \\u0000 ☃' }),
    );
    expect(rows.map((row) => row.account_id)).toEqual([tenant.accountId, tenant.accountId, tenant.accountId]);
    expect(JSON.parse(aiRow.body).data.domain).toBe(domain);
  });

  it('writes scores as JavaScript writes them and keeps the row the same number, however small or large', async () => {
    const tenant = await seedTenant(h);
    // Postgres's own float output would write 0.00001 as 1e-05.
    for (const score of [0.00001, 1e21, 100, 0.1 + 0.2]) {
      const ai = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: score });
      const scan = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score });
      const rows = await h.db('events').whereIn('id', [ai.eventId, scan.eventId]).orderBy('type').select('type', 'body', 'created_at');
      expect(rows.map((row) => row.body)).toEqual([
        specEnvelope('ai_check.completed', rows[0].created_at, { runId: ai.run.id, siteId: tenant.site.id, domain: tenant.site.domain, compositeScore: score }),
        specEnvelope('scan.completed', rows[1].created_at, { scanId: scan.scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score }),
      ]);
      expect([ai.run.compositeScore, scan.scan.score]).toEqual([score, score]);
    }
  });

  it('writes an event inserted beside a fact with the same envelope, and only the §6.1 fields of its data', async () => {
    const tenant = await seedTenant(h);
    const data = { scanId: 'scan_direct', siteId: tenant.site.id, domain: 'caf\u00e9.example\n☃', score: 42.5, secret: 'never sent' };

    const event = await insertEvent(h.db, tenant.accountId, 'scan.completed', data);

    const row = await h.db('events').where({ id: event.id }).first('body', 'created_at');
    expect(row.body).toBe(specEnvelope('scan.completed', row.created_at, { scanId: 'scan_direct', siteId: tenant.site.id, domain: data.domain, score: 42.5 }));
    expect(event.body).toBe(row.body);
  });

  it('records nothing when the site does not exist or the scan is not running', async () => {
    const tenant = await seedTenant(h);
    const scanId = (await tenant.newScan()).id;
    await completeScan(producerOf(h), { scanId, score: 1 });
    const before = await h.db('events').where({ account_id: tenant.accountId }).count<{ count: string }[]>('* as count');

    await expect(deployPowerUp(producerOf(h), { siteId: 'site_missing', powerUpId: 'pu' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(completeAiMonitorRun(producerOf(h), { siteId: 'site_missing', compositeScore: 1 })).rejects.toMatchObject({ code: 'not_found' });
    await expect(completeScan(producerOf(h), { scanId, score: 2 })).rejects.toMatchObject({ code: 'conflict' });

    const after = await h.db('events').where({ account_id: tenant.accountId }).count<{ count: string }[]>('* as count');
    expect(after).toEqual(before);
    expect(await h.db('scans').where({ id: scanId }).first('score')).toEqual({ score: 1 });
    expect(await h.db('power_up_deployments').where({ site_id: 'site_missing' })).toEqual([]);
  });
});
