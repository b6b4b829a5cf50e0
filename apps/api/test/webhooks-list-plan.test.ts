import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createSubscription, LIST_SUBSCRIPTIONS_JSON_SQL, LIST_SUBSCRIPTIONS_SQL, listSubscriptions, listSubscriptionsAsJson, newId, randomHex } from '@svc/core';
import { seedAccount } from '@svc/core/testing';
import { createTestApi, type TestApi } from './support.js';

let api: TestApi;
let accountId: string;
let crowdedAccountId: string;

/**
 * GET /webhooks of an account with 10 subscriptions beside one with 1,000: the average account
 * then looks large to the planner, as in the bench database.
 */
beforeAll(async () => {
  api = createTestApi();
  ({ accountId } = await seedAccount(api.db, ['read:webhooks']));
  for (let i = 0; i < 10; i++) await createSubscription(api.db, accountId, { url: `https://hooks.example.com/${i}`, events: ['*'] });
  ({ accountId: crowdedAccountId } = await seedAccount(api.db, ['read:webhooks']));
  const rows = Array.from({ length: 1_000 }, (_, i) => ({
    id: newId('wh'),
    account_id: crowdedAccountId,
    url: `https://crowded.example.com/${i}`,
    events: ['*'],
    secret: randomHex(32),
  }));
  await api.db.batchInsert('webhook_subscriptions', rows, 500);
  await api.db.raw('ANALYZE webhook_subscriptions');
}, 60_000);
afterAll(async () => {
  await api.db('webhook_subscriptions').whereIn('account_id', [accountId, crowdedAccountId]).delete();
  await api.close();
});

describe('the webhooks list statement', () => {
  it('walks webhook_subscriptions_account_idx in order in its generic plan, sorting nothing', async () => {
    const text = await api.db.transaction(async (tx) => {
      await tx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
      const result = await tx.raw(`EXPLAIN ${LIST_SUBSCRIPTIONS_SQL}`, [accountId, null]);
      return (result.rows as Array<{ 'QUERY PLAN': string }>).map((row) => row['QUERY PLAN']).join('\n');
    });
    expect(text).toMatch(/Index Scan using webhook_subscriptions_account_idx on webhook_subscriptions/);
    expect(text).not.toMatch(/Sort/);
  });

  it('is planned once per connection: Postgres keeps its generic plan instead of planning every execution', async () => {
    const plans = await api.db.transaction(async (tx) => {
      for (let i = 0; i < 10; i++) await listSubscriptions(tx, accountId);
      const result = await tx.raw("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'svc_list_subscriptions'");
      return result.rows[0] as { generic_plans: string; custom_plans: string };
    });
    // Postgres tries 5 custom plans before it compares them with the generic one.
    expect(Number(plans.custom_plans)).toBeLessThanOrEqual(5);
    expect(Number(plans.generic_plans)).toBeGreaterThanOrEqual(5);
  });

  it('still lists every subscription of an account, however many (the LIMIT is bound to NULL: no limit)', async () => {
    const crowded = await listSubscriptions(api.db, crowdedAccountId);
    expect(crowded).toHaveLength(1_000);
    const few = await listSubscriptions(api.db, accountId);
    expect(few.map((sub) => sub.url).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `https://hooks.example.com/${i}`).sort());
  });
});

describe('the webhooks list statement the API runs (each row written as JSON by Postgres)', () => {
  it('walks webhook_subscriptions_account_idx in order in its generic plan, sorting nothing', async () => {
    const text = await api.db.transaction(async (tx) => {
      await tx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
      const result = await tx.raw(`EXPLAIN ${LIST_SUBSCRIPTIONS_JSON_SQL}`, [accountId, null]);
      return (result.rows as Array<{ 'QUERY PLAN': string }>).map((row) => row['QUERY PLAN']).join('\n');
    });
    expect(text).toMatch(/Index Scan using webhook_subscriptions_account_idx on webhook_subscriptions/);
    expect(text).not.toMatch(/Sort/);
  });

  it('is planned once per connection: Postgres keeps its generic plan instead of planning every execution', async () => {
    const plans = await api.db.transaction(async (tx) => {
      for (let i = 0; i < 10; i++) await listSubscriptionsAsJson(tx, accountId);
      const result = await tx.raw("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'svc_list_subscriptions_json'");
      return result.rows[0] as { generic_plans: string; custom_plans: string };
    });
    expect(Number(plans.custom_plans)).toBeLessThanOrEqual(5);
    expect(Number(plans.generic_plans)).toBeGreaterThanOrEqual(5);
  });

  it('still lists every subscription of an account, however many', async () => {
    expect(await listSubscriptionsAsJson(api.db, crowdedAccountId)).toHaveLength(1_000);
  });
});
