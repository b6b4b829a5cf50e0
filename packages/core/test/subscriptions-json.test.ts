import { afterAll, describe, expect, it } from '@jest/globals';
import { createDb, createSubscription, listSubscriptionsAsJson, listSubscriptionsAsShown, type ShownSubscription } from '../src/index.js';
import { seedAccount, TEST_DATABASE_URL } from '../src/testing/index.js';

const db = createDb(TEST_DATABASE_URL, { poolMax: 2 });
afterAll(async () => {
  await db.destroy();
});

/** A listed subscription exactly as the API presented it before Postgres wrote it (spec §4.3). */
function presented(sub: ShownSubscription): string {
  return JSON.stringify({
    id: sub.id,
    url: sub.url,
    events: sub.events,
    createdAt: sub.createdAt,
    lastDeliveryAt: sub.lastDeliveryAt,
    failureCount: sub.failureCount,
    status: sub.status,
  });
}

describe('listSubscriptionsAsJson (each listed subscription written by Postgres)', () => {
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

    const json = await listSubscriptionsAsJson(db, accountId);
    const shown = await listSubscriptionsAsShown(db, accountId);

    expect(shown).toHaveLength(3);
    expect(json).toEqual(shown.map(presented));
    expect(JSON.parse(`[${json.join(',')}]`).map((sub: { id: string }) => sub.id)).toEqual([made[2]!.id, made[1]!.id, made[0]!.id]);
  });

  it('lists nothing for an account without subscriptions', async () => {
    const { accountId } = await seedAccount(db);
    expect(await listSubscriptionsAsJson(db, accountId)).toEqual([]);
  });
});
