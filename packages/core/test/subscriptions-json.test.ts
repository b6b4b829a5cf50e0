import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb } from '../src/index.js';
import { createSubscription, listSubscriptionsAsJsonArray } from '../src/operator.js';
import { seedAccount, TEST_DATABASE_URL } from '../src/testing/index.js';

const db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
afterAll(async () => {
  await db.destroy();
});

interface StoredSubscription {
  id: string;
  url: string;
  events: string[];
  created_at: Date;
  last_delivery_at: Date | null;
  failure_count: number;
  status: string;
}

/**
 * The list as the API presented it before Postgres wrote it (spec §4.4): the account's rows read
 * through knex, newest first (ties by id), deleting ones left out, each through JSON.stringify.
 */
async function presented(accountId: string): Promise<string> {
  const rows = (await db('webhook_subscriptions')
    .where({ account_id: accountId })
    .whereIn('status', ['active', 'disabled'])
    .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
    .select('id', 'url', 'events', 'created_at', 'last_delivery_at', 'failure_count', 'status')) as StoredSubscription[];
  const listed = rows.map((row) => ({
    id: row.id,
    url: row.url,
    events: row.events,
    createdAt: row.created_at.toISOString(),
    lastDeliveryAt: row.last_delivery_at === null ? null : row.last_delivery_at.toISOString(),
    failureCount: row.failure_count,
    status: row.status,
  }));
  return JSON.stringify(listed);
}

describe('listSubscriptionsAsJsonArray (the listed subscriptions written by Postgres as one JSON array)', () => {
  it('writes the same rows, in the same order, with the same bytes as JSON.stringify of the presented list', async () => {
    const { accountId } = await seedAccount(db);
    const other = await seedAccount(db);
    const urls = ['https://hooks.example.com/a?x=1&y="2"', 'https://hooks.example.com/b\\c', 'https://hooks.example.com/ünï/☃', 'https://hooks.example.com/d'];
    const events = [['*'], ['scan.completed', 'power_up.deployed'], ['ai_monitor.run_completed'], ['scan.completed']];
    const made = [];
    for (const [i, url] of urls.entries()) made.push(await createSubscription(db, accountId, { url, events: events[i]! }));
    await createSubscription(db, other.accountId, { url: 'https://other.example.com/', events: ['*'] });
    await db('webhook_subscriptions').where({ id: made[1]!.id }).update({ status: 'disabled', failure_count: 100, last_delivery_at: new Date('2026-01-02T03:04:05.678Z') });
    await db('webhook_subscriptions').where({ id: made[2]!.id }).update({ failure_count: 7, last_delivery_at: new Date('2026-11-23T00:00:00.001Z') });
    await db('webhook_subscriptions').where({ id: made[3]!.id }).update({ status: 'deleting' });

    const json = await listSubscriptionsAsJsonArray(db, accountId);

    expect(json).toBe(await presented(accountId));
    expect(JSON.parse(json).map((sub: { id: string }) => sub.id)).toEqual([made[2]!.id, made[1]!.id, made[0]!.id]);
  });

  it('writes times on a whole second with their .000, a time never delivered as null, and events needing escapes as JSON.stringify does', async () => {
    const { accountId } = await seedAccount(db);
    const awkward = ['quote"d', 'back\\slash', 'new\nline\ttab', 'control\u0001\u001f', 'ünï ☃ 😀', '</script>', 'del\u007f'];
    const onTheSecond = await createSubscription(db, accountId, { url: 'https://hooks.example.com/"q"\\', events: awkward });
    const never = await createSubscription(db, accountId, { url: 'https://hooks.example.com/never', events: ['*'] });
    await db('webhook_subscriptions')
      .where({ id: onTheSecond.id })
      .update({ created_at: new Date('2026-01-02T03:04:05.000Z'), last_delivery_at: new Date('2026-11-23T00:00:00.000Z'), failure_count: 2_147_483_647, status: 'disabled' });
    await db('webhook_subscriptions').where({ id: never.id }).update({ created_at: new Date('2026-01-01T00:00:00.010Z') });

    const json = await listSubscriptionsAsJsonArray(db, accountId);

    expect(json).toBe(
      JSON.stringify([{
        id: onTheSecond.id,
        url: 'https://hooks.example.com/"q"\\',
        events: awkward,
        createdAt: new Date('2026-01-02T03:04:05.000Z').toISOString(),
        lastDeliveryAt: new Date('2026-11-23T00:00:00.000Z').toISOString(),
        failureCount: 2_147_483_647,
        status: 'disabled',
      },
      { id: never.id, url: 'https://hooks.example.com/never', events: ['*'], createdAt: '2026-01-01T00:00:00.010Z', lastDeliveryAt: null, failureCount: 0, status: 'active' }]),
    );
    expect(json).toBe(await presented(accountId));
  });

  it('lists an empty array for an account without subscriptions', async () => {
    const { accountId } = await seedAccount(db);
    expect(await listSubscriptionsAsJsonArray(db, accountId)).toBe('[]');
  });
});
