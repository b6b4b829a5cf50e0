import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Webhook } from 'standardwebhooks';
import { completeAiMonitorRun, loadConfig, SecretBox, standardWebhooksSecret, verifySignature } from '@svc/core';
import { createSubscription, rotateSubscriptionSecret } from '@svc/core/operator';
import { createCapturingLogger, TEST_DATABASE_URL, TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';
import type { Dispatcher } from '../src/dispatcher.js';
import { producerOf, type AttemptRow, type DeliveryRow } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import type { ReceivedRequest } from './support/receiver.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const [keyA, keyB] = [randomBytes(32), randomBytes(32)];
/** SECRETS_ENCRYPTION_KEY listing these keys, newest first. */
const keyList = (...keys: Buffer[]) => ({ SECRETS_ENCRYPTION_KEY: keys.map((key) => key.toString('base64')).join(',') });
const boxOf = (...keys: Buffer[]) => new SecretBox(loadConfig(keyList(...keys)).secretsEncryptionKeys);
const idOf = (key: Buffer) => boxOf(key).currentKey!.id;
const UNDECRYPTABLE = 'webhook secret cannot be decrypted: its attempts fail, unsent, until it can be';

/** A tenant subscribed to every event at a path of its own, its secret stored as `box` seals it. */
async function subscribed(box: SecretBox, tenant?: Awaited<ReturnType<typeof seedTenant>>) {
  const t = tenant ?? (await seedTenant(h));
  const path = `/ok/secrets-${uniqueTag()}`;
  const sub = await createSubscription(h.db, t.accountId, { url: h.receiver.url(path), events: ['*'] }, box);
  return { tenant: t, sub, path };
}

async function fireEvent(siteId: string): Promise<string> {
  return (await completeAiMonitorRun(producerOf(h), { siteId, compositeScore: 50 })).eventId;
}

const deliveryOf = async (eventId: string, subscriptionId: string) =>
  (await h.db('deliveries').where({ event_id: eventId, subscription_id: subscriptionId }).first()) as DeliveryRow | undefined;
const attemptsOf = async (deliveryId: string) => (await h.db('delivery_attempts').where({ delivery_id: deliveryId }).orderBy('n')) as AttemptRow[];
const storedSecretOf = async (subscriptionId: string) =>
  (await h.db('webhook_subscriptions').where({ id: subscriptionId }).first('secret', 'previous_secret')) as { secret: string; previous_secret: string | null };

/** True when both schemes verify the request with this secret, as a receiver holding only it would check. */
function verifiesWith(received: ReceivedRequest, secret: string): boolean {
  let standard = true;
  try {
    new Webhook(standardWebhooksSecret(secret)).verify(received.body, received.headers as Record<string, string>);
  } catch {
    standard = false;
  }
  return standard && verifySignature(received.body, received.headers['x-service-signature'] as string, secret);
}

/** Runs the story with a dispatcher of its own, stopped after it whatever happens. */
async function withDispatcher<T>(env: Record<string, string>, story: (dispatcher: Dispatcher) => Promise<T>, logger = createCapturingLogger().logger): Promise<T> {
  const dispatcher = h.startDispatcher(env, { logger });
  try {
    return await story(dispatcher);
  } finally {
    await dispatcher.stop();
  }
}

describe('webhook secrets at rest, with SECRETS_ENCRYPTION_KEY', () => {
  it('stores a new subscription’s secret only as an envelope under the first key, and its delivery verifies at the receiver with the secret it was created with', async () => {
    const { tenant, sub, path } = await subscribed(boxOf(keyB, keyA));

    const stored = await storedSecretOf(sub.id);
    const received = await withDispatcher(keyList(keyB, keyA), async () => {
      await fireEvent(tenant.site.id);
      return waitFor(() => h.receiver.to(path).length === 1 && h.receiver.to(path)[0], 10_000, 'the delivery');
    });

    expect(sub.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(stored.secret).toMatch(new RegExp(`^enc:v1:${idOf(keyB)}:[A-Za-z0-9_-]+$`));
    expect(stored.secret).not.toContain(sub.secret);
    expect(verifiesWith(received, sub.secret)).toBe(true);
    expect(verifiesWith(received, 'f'.repeat(64))).toBe(false);
  });

  it('delivers a row sealed under key A with the list B,A, a rotation’s replaced secret too: both signatures verify, and the replaced one is sealed for its own column', async () => {
    const boxA = boxOf(keyA);
    const { tenant, sub, path } = await subscribed(boxA);
    const rotated = await rotateSubscriptionSecret(h.db, tenant.accountId, sub.id, 3_600, boxA);

    const stored = await storedSecretOf(sub.id);
    const received = await withDispatcher(keyList(keyB, keyA), async () => {
      await fireEvent(tenant.site.id);
      return waitFor(() => h.receiver.to(path).length === 1 && h.receiver.to(path)[0], 10_000, 'the delivery');
    });

    expect(boxA.keyIdOf(stored.secret)).toBe(idOf(keyA));
    expect(boxA.keyIdOf(stored.previous_secret!)).toBe(idOf(keyA));
    expect(`${stored.secret} ${stored.previous_secret}`).not.toContain(sub.secret);
    expect(`${stored.secret} ${stored.previous_secret}`).not.toContain(rotated.secret);
    expect(String(received.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifiesWith(received, rotated.secret)).toBe(true);
    // The replaced secret verifies the Standard Webhooks signature (X-Service-Signature is the new one's only).
    expect(() => new Webhook(standardWebhooksSecret(sub.secret)).verify(received.body, received.headers as Record<string, string>)).not.toThrow();
  });

  it('fails each attempt of a row sealed with a key no longer listed, recorded with the reason and unsent, logged once for the key; listed again, the next attempt delivers', async () => {
    const boxA = boxOf(keyA);
    const tenant = await seedTenant(h);
    const first = await subscribed(boxA, tenant);
    const second = await subscribed(boxA, tenant);
    const slow = { WEBHOOK_RETRY_DELAYS_MS: '1000,1000,1000,1000,1000,1000' };
    const capture = createCapturingLogger();

    const eventId = await withDispatcher(
      { ...slow, ...keyList(keyB) },
      async () => {
        const fired = await fireEvent(tenant.site.id);
        for (const { sub } of [first, second]) {
          await waitFor(async () => ((await deliveryOf(fired, sub.id))?.attempt_count ?? 0) >= 2, 15_000, 'two failed attempts of each delivery');
        }
        return fired;
      },
      capture.logger,
    );
    const failedAttempts = await Promise.all([first, second].map(async ({ sub }) => attemptsOf((await deliveryOf(eventId, sub.id))!.id)));
    const receivedWhileUnlisted = [first, second].map(({ path }) => h.receiver.to(path).length);
    const settled = await withDispatcher({ ...slow, ...keyList(keyB, keyA) }, () =>
      Promise.all([first, second].map(({ sub }) => waitFor(async () => (await deliveryOf(eventId, sub.id))?.status === 'delivered' && deliveryOf(eventId, sub.id), 15_000, 'the delivery'))),
    );

    const reason = `secret cannot be decrypted: key ${idOf(keyA)} is not in SECRETS_ENCRYPTION_KEY`;
    for (const attempts of failedAttempts) {
      expect(attempts.length).toBeGreaterThanOrEqual(2);
      for (const attempt of attempts) expect(attempt).toMatchObject({ status_code: null, error: reason, response_excerpt: null });
    }
    expect(receivedWhileUnlisted).toEqual([0, 0]);
    const logged = capture.entries.filter((entry) => entry.message === UNDECRYPTABLE);
    expect(logged).toEqual([expect.objectContaining({ level: 'error', keyId: idOf(keyA), reason: 'key-not-configured', configuredKeyIds: [idOf(keyB)], error: reason })]);
    expect(JSON.stringify(capture.entries)).not.toContain(first.sub.secret);
    for (const [i, { sub, path }] of [first, second].entries()) {
      const received = h.receiver.to(path);
      expect(received).toHaveLength(1);
      expect(received[0]!.headers['x-service-delivery-id']).toBe(settled[i]!.id);
      expect(verifiesWith(received[0]!, sub.secret)).toBe(true);
      const attempts = await attemptsOf(settled[i]!.id);
      expect(attempts.at(-1)).toMatchObject({ status_code: 200, error: null });
      expect(attempts.slice(0, -1).every((attempt) => attempt.error === reason)).toBe(true);
    }
  });

  it('fails the attempt of a sealed row the same way when SECRETS_ENCRYPTION_KEY is unset, and sends nothing', async () => {
    const { tenant, sub, path } = await subscribed(boxOf(keyA));
    const capture = createCapturingLogger();

    const attempts = await withDispatcher(
      {},
      async () => {
        const eventId = await fireEvent(tenant.site.id);
        const delivery = await waitFor(async () => ((await deliveryOf(eventId, sub.id))?.attempt_count ?? 0) >= 1 && deliveryOf(eventId, sub.id), 10_000, 'a first attempt');
        return attemptsOf(delivery!.id);
      },
      capture.logger,
    );

    const reason = `secret cannot be decrypted: key ${idOf(keyA)} is not in SECRETS_ENCRYPTION_KEY (the variable is unset)`;
    expect(attempts[0]).toMatchObject({ n: 1, status_code: null, error: reason });
    expect(h.receiver.to(path)).toHaveLength(0);
    expect(capture.entries.filter((entry) => entry.message === UNDECRYPTABLE)).toEqual([expect.objectContaining({ keyId: idOf(keyA), error: reason })]);
  });

  it('keeps delivering a row stored in plain text before the key was set', async () => {
    const { tenant, sub, path } = await subscribed(new SecretBox([]));

    const stored = await storedSecretOf(sub.id);
    const received = await withDispatcher(keyList(keyB), async () => {
      await fireEvent(tenant.site.id);
      return waitFor(() => h.receiver.to(path).length === 1 && h.receiver.to(path)[0], 10_000, 'the delivery');
    });

    expect(stored.secret).toBe(sub.secret);
    expect(verifiesWith(received, sub.secret)).toBe(true);
  });

  it('refuses an envelope copied to another subscription’s row, or altered, as not authentic: each attempt is recorded failed and nothing is sent', async () => {
    const boxB = boxOf(keyB);
    const tenant = await seedTenant(h);
    const [source, copied, altered] = [await subscribed(boxB, tenant), await subscribed(boxB, tenant), await subscribed(boxB, tenant)];
    const envelope = (await storedSecretOf(source.sub.id)).secret;
    const [head, payload] = [envelope.slice(0, envelope.lastIndexOf(':') + 1), Buffer.from(envelope.slice(envelope.lastIndexOf(':') + 1), 'base64url')];
    payload[15]! ^= 0x01;
    await h.db('webhook_subscriptions').where({ id: copied.sub.id }).update({ secret: envelope });
    await h.db('webhook_subscriptions').where({ id: altered.sub.id }).update({ secret: `${head}${payload.toString('base64url')}` });

    const { eventId, attempts } = await withDispatcher(keyList(keyB), async () => {
      const fired = await fireEvent(tenant.site.id);
      await waitFor(() => h.receiver.to(source.path).length === 1, 10_000, 'the untouched row’s delivery');
      const failed = [];
      for (const { sub } of [copied, altered]) {
        const delivery = await waitFor(async () => ((await deliveryOf(fired, sub.id))?.attempt_count ?? 0) >= 1 && deliveryOf(fired, sub.id), 10_000, 'a first attempt');
        failed.push(await attemptsOf(delivery!.id));
      }
      return { eventId: fired, attempts: failed };
    });

    const reason = `secret cannot be decrypted: key ${idOf(keyB)} does not authenticate it (altered, or copied from another row or column)`;
    for (const rows of attempts) for (const attempt of rows) expect(attempt).toMatchObject({ status_code: null, error: reason });
    expect(h.receiver.to(copied.path)).toHaveLength(0);
    expect(h.receiver.to(altered.path)).toHaveLength(0);
    expect(verifiesWith(h.receiver.to(source.path)[0]!, source.sub.secret)).toBe(true);
    expect((await deliveryOf(eventId, source.sub.id))?.status).toBe('delivered');
  });
});

describe('a dispatcher without SECRETS_ENCRYPTION_KEY', () => {
  it('warns once at start that secrets are stored in plain text and how to encrypt them, however many attempts it makes; with the key it never does', async () => {
    const { tenant, path } = await subscribed(new SecretBox([]));
    const [without, withKey] = [createCapturingLogger(), createCapturingLogger()];

    await withDispatcher(
      {},
      async () => {
        for (let i = 0; i < 3; i++) await fireEvent(tenant.site.id);
        await waitFor(() => h.receiver.to(path).length === 3, 10_000, 'three deliveries');
      },
      without.logger,
    );
    await withDispatcher(keyList(keyA), async () => undefined, withKey.logger);

    const plainTextWarning = (entry: { message: string }) => entry.message.startsWith('webhook secrets are stored in plain text');
    expect(without.entries.filter(plainTextWarning)).toEqual([
      expect.objectContaining({ level: 'warn', message: expect.stringContaining('set SECRETS_ENCRYPTION_KEY') }),
    ]);
    expect(withKey.entries.filter(plainTextWarning)).toEqual([]);
  });

  it('does not start with a bad SECRETS_ENCRYPTION_KEY: one line on stderr naming the variable and none of the value, exit 1', () => {
    const value = `${keyA.toString('base64')},${randomBytes(16).toString('base64')}`;

    const run = spawnSync(process.execPath, [fileURLToPath(new URL('../src/main.js', import.meta.url))], {
      env: { PATH: process.env.PATH, DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: TEST_REDIS_URL, SECRETS_ENCRYPTION_KEY: value },
      encoding: 'utf8',
      timeout: 20_000,
    });

    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^invalid configuration: SECRETS_ENCRYPTION_KEY .*entry 2 of 2.*\n$/);
    expect(run.stderr.split('\n')).toHaveLength(2);
    for (const part of value.split(',')) expect(run.stderr).not.toContain(part.slice(0, 8));
  });
});
