import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, forAccount, loadConfig, SecretBox, signStandardWebhook, verifySignature } from '@svc/core';
import { createSubscription, rotateSubscriptionSecret } from '@svc/core/operator';
import { seedAccount, seedSite, uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, type Harness, type ReceivedRequest } from '@svc/dispatcher/test-support';
import { expectOneJsonLine, runSvc, runSvcJson, testEnv } from './support.js';

const [keyA, keyB, removed] = [randomBytes(32), randomBytes(32), randomBytes(32)];
/** SECRETS_ENCRYPTION_KEY listing these keys, newest first. */
const keyList = (...keys: Buffer[]) => ({ SECRETS_ENCRYPTION_KEY: keys.map((key) => key.toString('base64')).join(',') });
const boxOf = (...keys: Buffer[]) => new SecretBox(loadConfig(keyList(...keys)).secretsEncryptionKeys);
const idOf = (key: Buffer) => boxOf(key).currentKey!.id;

// A database of each story's own: reencrypt walks every row it can see.
let h: Harness;
let env: Record<string, string>;
beforeEach(async () => {
  h = await createHarness();
  env = testEnv({ DATABASE_URL: h.config.databaseUrl, QUEUE_PREFIX: h.config.queuePrefix, ...keyList(keyB, keyA) });
});
afterEach(() => h.close());

/** A tenant with a site and subscriptions to every event, each stored as its box seals it. */
async function tenantWith(boxes: SecretBox[]) {
  const { accountId } = await seedAccount(h.db);
  const site = await seedSite(h.db, accountId);
  const subs = [];
  for (const box of boxes) {
    const path = `/ok/reencrypt-${uniqueTag()}`;
    subs.push({ path, box, ...(await createSubscription(h.db, accountId, { url: h.receiver.url(path), events: ['*'] }, box)) });
  }
  return { accountId, siteId: site.id, subs };
}

const storedSecrets = async () =>
  (await h.db('webhook_subscriptions').orderBy('id').select('id', 'secret', 'previous_secret')) as Array<{ id: string; secret: string; previous_secret: string | null }>;

/** True when one of the request's Standard Webhooks signatures is this secret's. */
function verifiesWith(received: ReceivedRequest, secret: string): boolean {
  const headers = received.headers as Record<string, string>;
  const expected = signStandardWebhook(headers['webhook-id']!, Number(headers['webhook-timestamp']), received.body, secret);
  return headers['webhook-signature']!.split(' ').includes(expected);
}

describe('svc secrets reencrypt', () => {
  it('seals plain-text rows and rows sealed under an older key with the newest, batch by batch beside a running dispatcher; deliveries still verify, and a second run rewrites nothing', async () => {
    const t = await tenantWith([new SecretBox([]), new SecretBox([]), boxOf(keyA), boxOf(keyA), boxOf(keyA)]);
    const rotated = await rotateSubscriptionSecret(h.db, t.accountId, t.subs[2]!.id, 3_600, boxOf(keyA));
    const answers = forAccount(h.db, t.accountId).idempotency;
    await answers.start('create-1', 'fingerprint', boxOf(keyA));
    await answers.finish('create-1', 201, { data: { subscription: { id: t.subs[3]!.id, secret: t.subs[3]!.secret } } }, boxOf(keyA));
    h.startDispatcher(keyList(keyB, keyA));

    const first = await runSvcJson(['secrets', 'reencrypt', '--batch-size', '2'], env);
    const rows = await storedSecrets();
    const second = await runSvcJson(['secrets', 'reencrypt'], env);
    const status = await runSvcJson(['secrets', 'status'], env);
    const replay = await answers.start('create-1', 'fingerprint', boxOf(keyB));

    expect(first).toEqual({
      keyId: idOf(keyB),
      reencrypted: 5,
      alreadyCurrent: 0,
      failed: 0,
      failures: [],
      storedAnswers: { reencrypted: 1, alreadyCurrent: 0, failed: 0, failures: [] },
    });
    for (const row of rows) {
      expect(row.secret).toMatch(new RegExp(`^enc:v1:${idOf(keyB)}:`));
      expect(row.previous_secret === null || row.previous_secret.startsWith(`enc:v1:${idOf(keyB)}:`)).toBe(true);
    }
    expect(rows.filter((row) => row.previous_secret !== null)).toHaveLength(1);
    expect(second).toMatchObject({ reencrypted: 0, alreadyCurrent: 5, failed: 0, storedAnswers: { reencrypted: 0, alreadyCurrent: 1, failed: 0 } });
    expect(status).toEqual({
      currentKeyId: idOf(keyB),
      keys: [
        { keyId: idOf(keyB), current: true, configured: true, secrets: 6, storedAnswers: 1 },
        { keyId: idOf(keyA), current: false, configured: true, secrets: 0, storedAnswers: 0 },
      ],
      plaintext: { secrets: 0, storedAnswers: 0 },
    });
    expect(replay).toEqual({ kind: 'replay', status: 201, body: JSON.stringify({ data: { subscription: { id: t.subs[3]!.id, secret: t.subs[3]!.secret } } }) });

    await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: t.siteId, compositeScore: 50 });
    const received = await waitFor(() => t.subs.every((sub) => h.receiver.to(sub.path).length === 1) && t.subs.map((sub) => h.receiver.to(sub.path)[0]!), 15_000, 'every delivery');
    t.subs.forEach((sub, i) => {
      const secret = i === 2 ? rotated.secret : sub.secret;
      expect([sub.id, verifiesWith(received[i]!, secret)]).toEqual([sub.id, true]);
      expect(verifySignature(received[i]!.body, received[i]!.headers['x-service-signature'] as string, secret)).toBe(true);
    });
    // The rotation's replaced secret, moved to the new key in its own column, still signs beside the new one.
    expect(verifiesWith(received[2]!, t.subs[2]!.secret)).toBe(true);
  });

  it('leaves and lists by subscription id each row no configured key opens, moves every other, and exits 1 with its one JSON object', async () => {
    const t = await tenantWith([boxOf(removed), boxOf(keyA), new SecretBox([])]);
    const lost = t.subs[0]!;
    const before = await h.db('webhook_subscriptions').where({ id: lost.id }).first('secret');

    const run = await runSvc(['secrets', 'reencrypt', '--json'], env);
    const human = await runSvc(['secrets', 'reencrypt'], env);

    expect(run.code).toBe(1);
    expectOneJsonLine(run.stdout);
    expect(JSON.parse(run.stdout)).toEqual({
      keyId: idOf(keyB),
      reencrypted: 2,
      alreadyCurrent: 0,
      failed: 1,
      failures: [{ subscriptionId: lost.id, error: `secret cannot be decrypted: key ${idOf(removed)} is not in SECRETS_ENCRYPTION_KEY` }],
      storedAnswers: { reencrypted: 0, alreadyCurrent: 0, failed: 0, failures: [] },
    });
    expect(await h.db('webhook_subscriptions').where({ id: lost.id }).first('secret')).toEqual(before);
    expect(human.code).toBe(1);
    expect(human.stdout).toBe(
      [
        `Sealed with key ${idOf(keyB)}: 0 subscriptions re-encrypted, 2 already current, 1 failed`,
        `  ${lost.id}: secret cannot be decrypted: key ${idOf(removed)} is not in SECRETS_ENCRYPTION_KEY`,
        'Stored Idempotency-Key answers: 0 re-encrypted, 0 already current, 0 failed',
        '',
      ].join('\n'),
    );
    expect(run.stderr + human.stderr).toBe('');
  });

  it('skips a row another transaction holds (a rotation in progress) without waiting for it, and writes it once it is free', async () => {
    const t = await tenantWith([boxOf(keyA), boxOf(keyA), boxOf(keyA)]);
    const held = t.subs[1]!;
    const holder = await h.db.transaction();
    await holder('webhook_subscriptions').where({ id: held.id }).forNoKeyUpdate().first('id');
    const startedAt = Date.now();

    const running = runSvcJson(['secrets', 'reencrypt'], env);
    // Both other rows are written while this one is held: the command did not wait for it.
    await waitFor(async () => (await storedSecrets()).filter((row) => row.secret.includes(idOf(keyB))).length === 2, 10_000, 'the free rows written');
    const whileHeld = (await storedSecrets()).find((row) => row.id === held.id)!;
    await holder.commit();
    const done = await running;

    expect(whileHeld.secret).toMatch(new RegExp(`^enc:v1:${idOf(keyA)}:`));
    expect(done).toMatchObject({ reencrypted: 3, alreadyCurrent: 0, failed: 0, failures: [] });
    expect((await storedSecrets()).every((row) => row.secret.startsWith(`enc:v1:${idOf(keyB)}:`))).toBe(true);
    expect(Date.now() - startedAt).toBeLessThan(10_000);
  });

  it('never writes back a secret a rotation replaced while it ran: every subscription ends with the secret its last rotation answered', async () => {
    const { accountId } = await seedAccount(h.db);
    const subs: Array<{ id: string; secret: string }> = [];
    for (let i = 0; i < 20; i++) {
      subs.push(...(await Promise.all(Array.from({ length: 50 }, () => createSubscription(h.db, accountId, { url: h.receiver.url('/ok/race'), events: ['*'] }, boxOf(keyA))))));
    }
    const latest = new Map(subs.map((sub) => [sub.id, sub.secret]));
    let running = true;
    let rotated = 0;

    // Four rotators, each on its own quarter of the rows (so each row's last rotation is known), as fast as they can.
    const rotators = [0, 1, 2, 3].map(async (quarter) => {
      const mine = subs.filter((_, i) => i % 4 === quarter);
      for (let i = 0; running; i++) {
        const sub = mine[i % mine.length]!;
        latest.set(sub.id, (await rotateSubscriptionSecret(h.db, accountId, sub.id, 0, boxOf(keyB, keyA))).secret);
        rotated += 1;
      }
    });
    await waitFor(() => rotated >= 8, 10_000, 'rotations under way');
    // One page of every row: sealing a thousand takes long enough for rotations to commit between its read and its write.
    const done = await runSvcJson<{ failed: number }>(['secrets', 'reencrypt', '--batch-size', '10000'], env).finally(() => (running = false));
    await Promise.all(rotators);

    expect(done.failed).toBe(0);
    const box = boxOf(keyB, keyA);
    const stored = await h.db('webhook_subscriptions').where({ account_id: accountId }).select('id', 'secret');
    const lost = stored.filter((row) => box.open(row.secret, { table: 'webhook_subscriptions', column: 'secret', subscriptionId: row.id }) !== latest.get(row.id));
    expect(lost).toEqual([]);
    expect(stored).toHaveLength(1_000);
  });

  it('refuses to run without SECRETS_ENCRYPTION_KEY, with one line and exit 2, changing nothing', async () => {
    await tenantWith([new SecretBox([])]);
    const before = await storedSecrets();

    const run = await runSvc(['secrets', 'reencrypt', '--json'], { ...env, SECRETS_ENCRYPTION_KEY: '' });
    const badSize = await runSvc(['secrets', 'reencrypt', '--batch-size', '0'], env);

    expect(run).toEqual({
      code: 2,
      stdout: '',
      stderr: 'svc: error: SECRETS_ENCRYPTION_KEY is not set: there is no key to seal with (set it here and on every API and dispatcher first)\n',
    });
    expect(badSize).toMatchObject({ code: 2, stdout: '', stderr: `svc: error: the batch size must be a whole number from 1 to 10000\n` });
    expect(await storedSecrets()).toEqual(before);
  });
});

describe('svc secrets status', () => {
  it('counts the secrets and stored answers under each key id, listed or not, and in plain text, and says which key can be removed', async () => {
    const t = await tenantWith([new SecretBox([]), boxOf(keyA), boxOf(removed), boxOf(keyB)]);
    await rotateSubscriptionSecret(h.db, t.accountId, t.subs[3]!.id, 60, boxOf(keyB));

    const json = await runSvcJson(['secrets', 'status'], env);
    const human = await runSvc(['secrets', 'status'], { ...env, ...keyList(keyB, keyA, randomBytes(32)) });

    expect(json).toEqual({
      currentKeyId: idOf(keyB),
      keys: [
        { keyId: idOf(keyB), current: true, configured: true, secrets: 2, storedAnswers: 0 },
        { keyId: idOf(keyA), current: false, configured: true, secrets: 1, storedAnswers: 0 },
        { keyId: idOf(removed), current: false, configured: false, secrets: 1, storedAnswers: 0 },
      ],
      plaintext: { secrets: 1, storedAnswers: 0 },
    });
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`New secrets are sealed with key ${idOf(keyB)}\n`);
    expect(human.stdout).toMatch(new RegExp(`  ${idOf(removed)}  NOT LISTED +1 secret, 0 stored answers \\(cannot be opened: list this key again, or these fail\\)\n`));
    expect(human.stdout).toMatch(/  k_[0-9a-f]{8}  listed +0 secrets, 0 stored answers \(nothing needs it: it can be removed\)\n/);
    expect(human.stdout).toMatch(/  plain text +1 secret, 0 stored answers\n$/);
  });
});

describe('svc webhooks rotate-secret and SECRETS_ENCRYPTION_KEY', () => {
  it('stores the new and the replaced secret sealed with the key; without it, warns on stderr that the secret is stored in plain text; a secret no listed key opens is replaced only without an overlap', async () => {
    const t = await tenantWith([new SecretBox([]), new SecretBox([]), boxOf(removed)]);
    const lost = t.subs[2]!;

    const sealed = await runSvcJson<{ secret: string }>(['webhooks', 'rotate-secret', t.subs[0]!.id, '--overlap', '60'], { ...env, LOG_LEVEL: 'warn' });
    const plain = await runSvc(['webhooks', 'rotate-secret', t.subs[1]!.id, '--json'], { ...env, SECRETS_ENCRYPTION_KEY: '', LOG_LEVEL: 'warn' });
    const lostBefore = await h.db('webhook_subscriptions').where({ id: lost.id }).first('secret');
    const withOverlap = await runSvc(['webhooks', 'rotate-secret', lost.id, '--json'], env);
    const lostAfter = await h.db('webhook_subscriptions').where({ id: lost.id }).first('secret');
    const withoutOverlap = await runSvcJson<{ secret: string }>(['webhooks', 'rotate-secret', lost.id, '--overlap', '0'], env);

    const [first, second] = [t.subs[0]!, t.subs[1]!].map(async (sub) => h.db('webhook_subscriptions').where({ id: sub.id }).first('secret', 'previous_secret'));
    const sealedRow = await first;
    expect(sealedRow.secret).toMatch(new RegExp(`^enc:v1:${idOf(keyB)}:`));
    expect(sealedRow.previous_secret).toMatch(new RegExp(`^enc:v1:${idOf(keyB)}:`));
    expect(boxOf(keyB).open(sealedRow.secret, { table: 'webhook_subscriptions', column: 'secret', subscriptionId: t.subs[0]!.id })).toBe(sealed.secret);
    expect(plain.code).toBe(0);
    expect((await second).secret).toBe(JSON.parse(plain.stdout).secret);
    const warnings = plain.stderr.trim().split('\n').map((line) => JSON.parse(line) as { level: string; message: string });
    expect(warnings).toEqual([expect.objectContaining({ level: 'warn', message: expect.stringMatching(/^webhook secrets are stored in plain text: set SECRETS_ENCRYPTION_KEY/) })]);
    // A secret whose key is lost: an overlap would need it (exit 1, nothing changed); overlap 0 replaces it.
    expect(withOverlap).toEqual({ code: 1, stdout: '', stderr: `svc: error: secret cannot be decrypted: key ${idOf(removed)} is not in SECRETS_ENCRYPTION_KEY\n` });
    expect(lostAfter).toEqual(lostBefore);
    const replaced = await h.db('webhook_subscriptions').where({ id: lost.id }).first('secret', 'previous_secret');
    expect(replaced.previous_secret).toBeNull();
    expect(boxOf(keyB).open(replaced.secret, { table: 'webhook_subscriptions', column: 'secret', subscriptionId: lost.id })).toBe(withoutOverlap.secret);
  });
});
