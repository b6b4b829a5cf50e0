import { afterAll, describe, expect, it } from '@jest/globals';
import { hashApiKey } from '@svc/core';
import { createAccount } from '@svc/core/operator';
import { seedAccount, uniqueTag } from '@svc/core/testing';
import { ISO_8601, openTestDb, runSvc, runSvcJson } from './support.js';

const db = openTestDb();
afterAll(async () => {
  await db.destroy();
});

async function newAccountId(): Promise<string> {
  return (await createAccount(db, { name: `Keys ${uniqueTag()}` })).id;
}

describe('svc keys create', () => {
  it('creates a key with the given scopes, shows the full key once and stores only its hash', async () => {
    const accountId = await newAccountId();

    const out = await runSvcJson<{ id: string; key: string; prefix: string; name: string; scopes: string[]; createdAt: string }>([
      'keys', 'create', '--account', accountId, '--name', 'Zapier', '--scopes', 'read:sites, read:scans',
    ]);

    expect(out).toEqual({
      id: expect.stringMatching(/^key_/),
      key: expect.stringMatching(/^svc_live_[A-Za-z0-9_-]{32}$/),
      prefix: out.key.slice(0, 12),
      name: 'Zapier',
      scopes: ['read:sites', 'read:scans'],
      createdAt: expect.stringMatching(ISO_8601),
    });
    const row = await db('api_keys').where({ id: out.id }).first();
    expect(row).toMatchObject({ account_id: accountId, name: 'Zapier', prefix: out.prefix, scopes: 'read:sites,read:scans' });
    expect(row.key_hash).toBe(hashApiKey(out.key));
    expect(JSON.stringify(row)).not.toContain(out.key);
  });

  it('tells a person to store the key now', async () => {
    const accountId = await newAccountId();

    const run = await runSvc(['keys', 'create', '--account', accountId, '--name', 'Ops', '--scopes', 'read:webhooks']);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^Created key key_\w+ \(Ops\) with scopes read:webhooks\n {2}key: svc_live_\S+\nStore the key now: it is not shown again\.\n$/,
    );
  });

  it('refuses an unknown scope with exit 2 and stores no key', async () => {
    const accountId = await newAccountId();

    const run = await runSvc(['keys', 'create', '--account', accountId, '--name', 'Bad', '--scopes', 'read:sites,admin', '--json']);

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('svc: error: unknown scope(s): admin\n');
    expect(await db('api_keys').where({ account_id: accountId })).toEqual([]);
  });

  it('refuses an empty scope list', async () => {
    const accountId = await newAccountId();

    const run = await runSvc(['keys', 'create', '--account', accountId, '--name', 'None', '--scopes', ' , ']);

    expect(run.code).toBe(2);
    expect(run.stderr).toBe('svc: error: grant at least one scope\n');
    expect(await db('api_keys').where({ account_id: accountId })).toEqual([]);
  });
});

describe('svc keys list', () => {
  it('lists the account’s keys newest first without any hash or full key', async () => {
    const accountId = await newAccountId();
    const first = await runSvcJson<{ id: string; key: string }>([
      'keys', 'create', '--account', accountId, '--name', 'first', '--scopes', 'read:sites',
    ]);
    const second = await runSvcJson<{ id: string; key: string }>([
      'keys', 'create', '--account', accountId, '--name', 'second', '--scopes', 'read:scans,write:webhooks',
    ]);
    await runSvcJson(['keys', 'revoke', first.id]);

    const run = await runSvc(['keys', 'list', '--account', accountId, '--json']);

    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as { keys: Array<Record<string, unknown>> };
    expect(out.keys).toEqual([
      {
        id: second.id,
        name: 'second',
        prefix: second.key.slice(0, 12),
        scopes: ['read:scans', 'write:webhooks'],
        createdAt: expect.stringMatching(ISO_8601),
        lastUsedAt: null,
        revokedAt: null,
      },
      {
        id: first.id,
        name: 'first',
        prefix: first.key.slice(0, 12),
        scopes: ['read:sites'],
        createdAt: expect.stringMatching(ISO_8601),
        lastUsedAt: null,
        revokedAt: expect.stringMatching(ISO_8601),
      },
    ]);
    const hashes = (await db('api_keys').where({ account_id: accountId }).select('key_hash')).map((row) => row.key_hash as string);
    for (const secret of [first.key, second.key, ...hashes]) expect(run.stdout).not.toContain(secret);
  });

  it('never shows another account’s keys', async () => {
    const mine = await newAccountId();
    await seedAccount(db);

    const out = await runSvcJson(['keys', 'list', '--account', mine]);

    expect(out).toEqual({ keys: [] });
  });

  it('prints one line per key for a person, with the prefix only', async () => {
    const accountId = await newAccountId();
    const created = await runSvcJson<{ id: string; key: string }>([
      'keys', 'create', '--account', accountId, '--name', 'reader', '--scopes', 'read:sites',
    ]);

    const run = await runSvc(['keys', 'list', '--account', accountId]);

    expect(run.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^${created.id} {2}${created.key.slice(0, 12)}… {2}reader {2}\\[read:sites\\] {2}created .*, never used, active$`)),
    ]);
    expect(run.stdout).not.toContain(created.key);
  });
});

describe('svc keys revoke', () => {
  it('revokes a key and keeps the first revocation time when revoked again', async () => {
    const accountId = await newAccountId();
    const created = await runSvcJson<{ id: string }>(['keys', 'create', '--account', accountId, '--name', 'old', '--scopes', 'read:sites']);

    const out = await runSvcJson<{ id: string; revokedAt: string }>(['keys', 'revoke', created.id]);
    const again = await runSvcJson<{ id: string; revokedAt: string }>(['keys', 'revoke', created.id]);

    expect(out).toEqual({ id: created.id, revokedAt: expect.stringMatching(ISO_8601) });
    expect(again).toEqual(out);
    const row = await db('api_keys').where({ id: created.id }).first();
    expect((row.revoked_at as Date).toISOString()).toBe(out.revokedAt);
  });

  it('refuses an unknown key id with exit 2', async () => {
    const run = await runSvc(['keys', 'revoke', 'key_does_not_exist', '--json']);

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('svc: error: key key_does_not_exist does not exist\n');
  });
});
