import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, type Db, newId, randomHex } from '@svc/core';
import { createSubscription, LIST_SUBSCRIPTIONS_JSON_SQL, listSubscriptionsAsJsonArray } from '@svc/core/operator';
import { createIsolatedDatabase, seedAccount } from '@svc/core/testing';

let isolated: { url: string; drop(): Promise<void> };
let db: Db;
let accountId: string;

/**
 * GET /webhooks of an account with 10 subscriptions among accounts shaped like the bench's: one
 * with 10,000 subscriptions, one with 1,000 and 50 with one each. With these statistics a list
 * statement with a single NULL-bound LIMIT kept its generic plan by a fraction of a cost unit, or
 * lost it (re-planned on every execution). A database of its own, so the statistics are these.
 */
beforeAll(async () => {
  isolated = await createIsolatedDatabase();
  db = createDb(isolated.url);
  ({ accountId } = await seedAccount(db, ['read:webhooks']));
  for (let i = 0; i < 10; i++) await createSubscription(db, accountId, { url: `https://hooks.example.com/${i}`, events: ['scan.completed', 'power_up.deployed'] });
  const crowd = async (count: number) => {
    const { accountId: crowdedId } = await seedAccount(db, ['read:webhooks']);
    const rows = Array.from({ length: count }, () => ({ id: newId('wh'), account_id: crowdedId, url: 'https://crowded.example.com/', events: ['*'], secret: randomHex(32) }));
    await db.batchInsert('webhook_subscriptions', rows, 1_000);
  };
  await crowd(10_000);
  await crowd(1_000);
  for (let i = 0; i < 50; i++) await crowd(1);
  await db.raw('ANALYZE webhook_subscriptions');
}, 120_000);
afterAll(async () => {
  await db.destroy();
  await isolated.drop();
});

describe('the webhooks list statement the API runs, among many accounts of very different sizes', () => {
  it('keeps its generic plan, an ordered walk of webhook_subscriptions_account_idx, instead of planning every execution', async () => {
    const { plans, plan } = await db.transaction(async (tx) => {
      for (let i = 0; i < 10; i++) await listSubscriptionsAsJsonArray(tx, accountId);
      const stats = await tx.raw("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'svc_list_subscriptions_json'");
      await tx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
      await tx.raw(`PREPARE webhooks_list_plan_probe AS ${LIST_SUBSCRIPTIONS_JSON_SQL.replace('?', '$1').replace('?', '$2').replace('?', '$3')}`);
      const explained = await tx.raw(`EXPLAIN EXECUTE webhooks_list_plan_probe('${accountId}', NULL, NULL)`);
      await tx.raw('DEALLOCATE webhooks_list_plan_probe');
      return {
        plans: stats.rows[0] as { generic_plans: string; custom_plans: string },
        plan: (explained.rows as Array<{ 'QUERY PLAN': string }>).map((row) => row['QUERY PLAN']).join('\n'),
      };
    });

    expect(Number(plans.custom_plans)).toBeLessThanOrEqual(5);
    expect(Number(plans.generic_plans)).toBeGreaterThanOrEqual(5);
    expect(plan).toMatch(/Index Scan using webhook_subscriptions_account_idx on webhook_subscriptions/);
    expect(plan).not.toMatch(/Sort/);
  });

  it('lists every subscription of the small account and of the one with 10,000, newest first', async () => {
    const few = JSON.parse(await listSubscriptionsAsJsonArray(db, accountId)) as Array<{ url: string; createdAt: string }>;
    expect(few.map((sub) => sub.url).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `https://hooks.example.com/${i}`).sort());
    expect(few.map((sub) => sub.createdAt)).toEqual(few.map((sub) => sub.createdAt).sort().reverse());
    const [largest] = (await db('webhook_subscriptions').select('account_id').count({ n: '*' }).groupBy('account_id').orderBy('n', 'desc').limit(1)) as Array<{ account_id: string }>;
    expect(JSON.parse(await listSubscriptionsAsJsonArray(db, largest!.account_id))).toHaveLength(10_000);
  });
});
