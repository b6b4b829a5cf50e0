import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { buildEventBody, completeAiMonitorRun, completeScan, deployPowerUp } from '@svc/core';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf } from './support/delivery-probe.js';

/** Issue 13: each producer writes its fact and its event in one statement, the body assembled by Postgres. */
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
      buildEventBody('ai_check.completed', aiRow.created_at, { runId: ai.run.id, siteId: tenant.site.id, domain, compositeScore: 72.25 }),
    );
    expect(scanRow.body).toBe(
      buildEventBody('scan.completed', scanRow.created_at, { scanId: scan.scan.id, siteId: tenant.site.id, domain, score: 87.5 }),
    );
    expect(deployRow.body).toBe(
      buildEventBody('power_up.deployed', deployRow.created_at, { deploymentId: deployed.deployment.id, siteId: tenant.site.id, powerUpId: 'pu "x" \\u0000 ☃' }),
    );
    expect(rows.map((row) => row.account_id)).toEqual([tenant.accountId, tenant.accountId, tenant.accountId]);
    expect(JSON.parse(aiRow.body).data.domain).toBe(domain);
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
