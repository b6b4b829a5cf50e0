import { afterAll, describe, expect, it } from '@jest/globals';
import { seedAccount, uniqueTag } from '@svc/core/testing';
import { ISO_8601, openTestDb, runSvc, runSvcJson } from './support.js';

const db = openTestDb();
afterAll(async () => {
  await db.destroy();
});

describe('svc accounts create', () => {
  it('creates an account and prints its id as one JSON object', async () => {
    const name = `Acme ${uniqueTag()}`;

    const out = await runSvcJson(['accounts', 'create', '--name', name]);

    expect(Object.keys(out)).toEqual(['id']);
    expect(out.id).toMatch(/^acct_/);
    const row = await db('accounts').where({ id: out.id }).first();
    expect(row.name).toBe(name);
  });

  it('prints a one-line summary without --json', async () => {
    const run = await runSvc(['accounts', 'create', '--name', 'Readable Ltd']);

    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/^Created account acct_\w+ \(Readable Ltd\)\n$/);
  });

  it('refuses a blank name with exit 2 and stores nothing', async () => {
    const name = '   ';

    const run = await runSvc(['accounts', 'create', '--name', name]);

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^svc: error: option '--name <name>' argument '   ' is invalid\. It must not be blank\.\n$/);
    expect(await db('accounts').where({ name }).first()).toBeUndefined();
  });
});

describe('svc sites add', () => {
  it('adds a site with its domain normalized and prints the summary', async () => {
    const { accountId } = await seedAccount(db);
    const tag = uniqueTag();

    const out = await runSvcJson([
      'sites', 'add', '--account', accountId, '--domain', `https://www.Shop-${tag}.Example.COM/`, '--name', 'Shop',
    ]);

    expect(out).toEqual({
      id: expect.stringMatching(/^site_/),
      domain: `shop-${tag}.example.com`,
      name: 'Shop',
      status: 'active',
      createdAt: expect.stringMatching(ISO_8601),
    });
    const row = await db('sites').where({ id: out.id }).first();
    expect(row).toMatchObject({ account_id: accountId, domain: `shop-${tag}.example.com`, name: 'Shop', status: 'active' });
    expect((row.created_at as Date).toISOString()).toBe(out.createdAt);
  });

  it('stores the given status and a null name when none is given', async () => {
    const { accountId } = await seedAccount(db);

    const out = await runSvcJson(['sites', 'add', '--account', accountId, '--domain', 'prospect.example', '--status', 'prospect']);

    expect(out).toMatchObject({ domain: 'prospect.example', name: null, status: 'prospect' });
    expect(await db('sites').where({ id: out.id }).first()).toMatchObject({ status: 'prospect', name: null });
  });

  it('prints the normalized domain in the human summary', async () => {
    const { accountId } = await seedAccount(db);

    const run = await runSvc(['sites', 'add', '--account', accountId, '--domain', 'WWW.Human.Example/']);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Added site site_\w+\n  domain: human\.example\n  name:   \(none\)\n  status: active\n$/);
  });

  it('refuses an unknown status with exit 2, naming the flag and the choices, and stores nothing', async () => {
    const { accountId } = await seedAccount(db);

    const run = await runSvc(['sites', 'add', '--account', accountId, '--domain', 'status.example', '--status', 'paused', '--json']);

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      "svc: error: option '--status <status>' argument 'paused' is invalid. Allowed choices are active, inactive, prospect.\n",
    );
    expect(await db('sites').where({ account_id: accountId })).toEqual([]);
  });

  it('refuses a second site with the same normalized domain in one account', async () => {
    const { accountId } = await seedAccount(db);
    await runSvcJson(['sites', 'add', '--account', accountId, '--domain', 'twice.example']);

    const run = await runSvc(['sites', 'add', '--account', accountId, '--domain', 'https://www.TWICE.example/', '--json']);

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('svc: error: the account already has a site with domain twice.example\n');
    expect(await db('sites').where({ account_id: accountId })).toHaveLength(1);
  });

  it('refuses a domain with a path, and an account that does not exist, without a stack trace', async () => {
    const { accountId } = await seedAccount(db);

    const withPath = await runSvc(['sites', 'add', '--account', accountId, '--domain', 'example.com/shop']);
    const noAccount = await runSvc(['sites', 'add', '--account', 'acct_missing', '--domain', 'orphan.example']);

    expect(withPath.code).toBe(2);
    expect(withPath.stderr).toMatch(/^svc: error: "example\.com\/shop" is not a bare domain.*\n$/);
    expect(noAccount.code).toBe(2);
    expect(noAccount.stderr).toBe('svc: error: account acct_missing does not exist\n');
    expect(await db('sites').where({ account_id: accountId })).toEqual([]);
  });
});
