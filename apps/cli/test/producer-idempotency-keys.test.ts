import { afterAll, describe, expect, it } from '@jest/globals';
import { startScan } from '@svc/core/operator';
import { uniqueTag } from '@svc/core/testing';
import { newSite, openTestDb, runSvc, runSvcJson, testEnv } from './support.js';

const db = openTestDb();
const env = testEnv();

afterAll(async () => {
  await db.destroy();
});

describe('svc producer commands with --idempotency-key', () => {
  it('power-ups deploy run twice with one key records one deployment and one event, and prints them both times', async () => {
    const { accountId, siteId } = await newSite(db);
    const key = `deployer:${uniqueTag()}`;
    const args = ['power-ups', 'deploy', '--site', siteId, '--power-up', 'pu_schema_markup', '--idempotency-key', key];

    const first = await runSvcJson<{ id: string; eventId: string }>(args, env);
    const second = await runSvcJson<{ id: string; eventId: string }>(args, env);

    expect(second).toEqual(first);
    expect(await db('power_up_deployments').where({ site_id: siteId }).select('id')).toEqual([{ id: first.id }]);
    expect(await db('events').where({ account_id: accountId }).select('id', 'idempotency_key')).toEqual([{ id: first.eventId, idempotency_key: key }]);
  });

  it('scans complete run again with its key prints the completed scan instead of exiting 1', async () => {
    const { accountId, siteId } = await newSite(db);
    const scan = await startScan(db, siteId);
    const args = ['scans', 'complete', scan.id, '--score', '80', '--idempotency-key', `scanner:${scan.id}`];

    const first = await runSvcJson<{ id: string; status: string; eventId: string }>(args, env);
    const second = await runSvcJson<{ id: string; status: string; eventId: string }>(args, env);

    expect(second).toEqual(first);
    expect(first).toMatchObject({ id: scan.id, status: 'completed', score: 80 });
    expect(await db('events').where({ account_id: accountId }).select('id')).toEqual([{ id: first.eventId }]);
  });

  it('ai-runs complete with a key already used for another score exits 1, naming the key, and records nothing', async () => {
    const { accountId, siteId } = await newSite(db);
    const key = `monitor:${uniqueTag()}`;
    const first = await runSvcJson<{ id: string; eventId: string }>(['ai-runs', 'complete', '--site', siteId, '--score', '50', '--idempotency-key', key], env);

    const reused = await runSvc(['ai-runs', 'complete', '--site', siteId, '--score', '51', '--idempotency-key', key, '--json'], env);

    expect(reused).toEqual({ code: 1, stdout: '', stderr: `svc: error: idempotency key "${key}" was already used for another call\n` });
    expect(await db('ai_monitor_runs').where({ site_id: siteId }).select('id')).toEqual([{ id: first.id }]);
    expect(await db('events').where({ account_id: accountId }).select('id')).toEqual([{ id: first.eventId }]);
  });

  it('refuses a key with a space with exit 2 before recording anything', async () => {
    const { siteId } = await newSite(db);

    const run = await runSvc(['power-ups', 'deploy', '--site', siteId, '--power-up', 'pu_x', '--idempotency-key', 'two words', '--json'], env);

    expect(run).toMatchObject({ code: 2, stdout: '' });
    expect(run.stderr).toContain('idempotencyKey must be 1 to 200 visible ASCII characters');
    expect(await db('power_up_deployments').where({ site_id: siteId })).toEqual([]);
  });
});
