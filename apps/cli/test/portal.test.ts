import { afterAll, describe, expect, it } from '@jest/globals';
import { hashApiKey } from '@svc/core';
import { createAccount } from '@svc/core/operator';
import { uniqueTag } from '@svc/core/testing';
import { ISO_8601, openTestDb, runSvc, testEnv } from './support.js';

const db = openTestDb();
afterAll(async () => {
  await db.destroy();
});

async function newAccountId(): Promise<string> {
  return (await createAccount(db, { name: `Portal ${uniqueTag()}` })).id;
}

describe('svc portal link', () => {
  it('prints { url, expiresAt } for a single-use link on PUBLIC_BASE_URL, valid 10 minutes, stored only as a hash', async () => {
    const accountId = await newAccountId();

    const run = await runSvc(['portal', 'link', '--account', accountId], testEnv({ PUBLIC_BASE_URL: 'https://visibility.example.com' }));

    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as { url: string; expiresAt: string };
    expect(Object.keys(out)).toEqual(['url', 'expiresAt']);
    expect(out.url).toMatch(/^https:\/\/visibility\.example\.com\/settings\/sign-in\?token=svcl_[A-Za-z0-9_-]{43}$/);
    expect(out.expiresAt).toMatch(ISO_8601);
    const seconds = (Date.parse(out.expiresAt) - Date.now()) / 1000;
    expect(seconds).toBeGreaterThan(580);
    expect(seconds).toBeLessThanOrEqual(601);
    const token = new URL(out.url).searchParams.get('token')!;
    const rows = await db('settings_links').where({ account_id: accountId });
    expect(rows).toEqual([expect.objectContaining({ token_hash: hashApiKey(token), used_at: null })]);
    expect(JSON.stringify(rows)).not.toContain(token);
  });

  it('prints the same object with --json, and takes --ttl up to an hour', async () => {
    const accountId = await newAccountId();

    const run = await runSvc(['portal', 'link', '--account', accountId, '--ttl', '3600', '--json']);

    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as { url: string; expiresAt: string };
    expect(out.url).toMatch(/^http:\/\/localhost:\d+\/settings\/sign-in\?token=/);
    expect((Date.parse(out.expiresAt) - Date.now()) / 1000).toBeGreaterThan(3500);
  });

  it('refuses a lifetime over an hour, a malformed one and an unknown account with exit 2, issuing nothing', async () => {
    const accountId = await newAccountId();

    const long = await runSvc(['portal', 'link', '--account', accountId, '--ttl', '3601']);
    const bad = await runSvc(['portal', 'link', '--account', accountId, '--ttl', '10m']);
    const unknown = await runSvc(['portal', 'link', '--account', `acct_${uniqueTag()}`]);

    expect([long.code, bad.code, unknown.code]).toEqual([2, 2, 2]);
    expect(long.stderr).toBe("svc: error: the link's lifetime must be a whole number of seconds from 1 to 3600\n");
    expect(bad.stderr).toMatch(/^svc: .*--ttl.*whole number of seconds/);
    expect(unknown.stderr).toMatch(/^svc: error: account acct_\S+ does not exist\n$/);
    expect(await db('settings_links').where({ account_id: accountId })).toEqual([]);
  });

  it('refuses a PUBLIC_BASE_URL that is not an origin, naming the variable', async () => {
    const run = await runSvc(['portal', 'link', '--account', await newAccountId()], testEnv({ PUBLIC_BASE_URL: 'https://example.com/settings' }));

    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/PUBLIC_BASE_URL/);
  });
});
