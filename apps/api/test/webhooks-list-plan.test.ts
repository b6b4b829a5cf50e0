import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, type Db, newId, randomHex } from '@svc/core';
import { createSubscription, LIST_SUBSCRIPTIONS_JSON_SQL, listSubscriptionsAsJsonArray } from '@svc/core/operator';
import { createIsolatedDatabase, seedAccount } from '@svc/core/testing';

let isolated: { url: string; drop(): Promise<void> };
let db: Db;
let accountId: string;
let crowdedAccountId: string;

/**
 * GET /webhooks of an account with 10 subscriptions beside one with 1,000: the average account
 * then looks large to the planner, as in the bench database. A database of its own, so the
 * planner's statistics are these and not whatever other tests left in the shared one.
 */
beforeAll(async () => {
  isolated = await createIsolatedDatabase();
  db = createDb(isolated.url);
  ({ accountId } = await seedAccount(db, ['read:webhooks']));
  for (let i = 0; i < 10; i++) await createSubscription(db, accountId, { url: `https://hooks.example.com/${i}`, events: ['*'] });
  ({ accountId: crowdedAccountId } = await seedAccount(db, ['read:webhooks']));
  const rows = Array.from({ length: 1_000 }, (_, i) => ({
    id: newId('wh'),
    account_id: crowdedAccountId,
    url: `https://crowded.example.com/${i}`,
    events: ['*'],
    secret: randomHex(32),
  }));
  await db.batchInsert('webhook_subscriptions', rows, 500);
  await db.raw('ANALYZE webhook_subscriptions');
}, 60_000);
afterAll(async () => {
  await db.destroy();
  await isolated.drop();
});

/**
 * The generic plan of a list statement (`?` placeholders: the account, then the LIMIT), the one a
 * connection keeps after its fifth execution. A plain EXPLAIN with bound values would show a custom
 * plan for these values, which depends on what else the test database holds.
 */
async function genericPlanOf(sql: string): Promise<string> {
  let n = 0;
  const text = sql.replace(/\?/g, () => `$${++n}`);
  return db.transaction(async (tx) => {
    await tx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
    await tx.raw(`PREPARE webhooks_list_plan_probe AS ${text}`);
    try {
      // The account, then NULL for each LIMIT (LIMIT ALL).
      const result = await tx.raw(`EXPLAIN EXECUTE webhooks_list_plan_probe('${accountId}'${', NULL'.repeat(n - 1)})`);
      return (result.rows as Array<{ 'QUERY PLAN': string }>).map((row) => row['QUERY PLAN']).join('\n');
    } finally {
      await tx.raw('DEALLOCATE webhooks_list_plan_probe');
    }
  });
}

describe('the webhooks list statement (the list written by Postgres as one JSON array)', () => {
  it('walks webhook_subscriptions_account_idx in order in its generic plan, sorting nothing', async () => {
    const text = await genericPlanOf(LIST_SUBSCRIPTIONS_JSON_SQL);
    expect(text).toMatch(/Index Scan using webhook_subscriptions_account_idx on webhook_subscriptions/);
    expect(text).not.toMatch(/Sort/);
  });

  it('is planned once per connection: Postgres keeps its generic plan instead of planning every execution', async () => {
    const plans = await db.transaction(async (tx) => {
      for (let i = 0; i < 10; i++) await listSubscriptionsAsJsonArray(tx, accountId);
      const result = await tx.raw("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'svc_list_subscriptions_json'");
      return result.rows[0] as { generic_plans: string; custom_plans: string };
    });
    expect(Number(plans.custom_plans)).toBeLessThanOrEqual(5);
    expect(Number(plans.generic_plans)).toBeGreaterThanOrEqual(5);
  });

  it('still lists every subscription of an account, however many (the LIMITs are bound to NULL: no limit)', async () => {
    expect(JSON.parse(await listSubscriptionsAsJsonArray(db, crowdedAccountId))).toHaveLength(1_000);
    const few = JSON.parse(await listSubscriptionsAsJsonArray(db, accountId)) as Array<{ url: string; createdAt: string }>;
    expect(few.map((sub) => sub.url).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `https://hooks.example.com/${i}`).sort());
    expect(few.map((sub) => Date.parse(sub.createdAt))).toEqual(few.map((sub) => Date.parse(sub.createdAt)).sort((x, y) => y - x));
  });
});
