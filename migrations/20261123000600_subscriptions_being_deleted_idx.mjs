// The dispatcher's sweep looks, every DISPATCHER_SWEEP_INTERVAL_MS, for subscriptions left in
// `deleting` by an API process that died mid-revocation (purgeAbandonedRevocations). Without an
// index that read scanned every subscription of every account: its cost grew with the table
// (35 ms a sweep at 11,000 subscriptions in the bench), though almost no row is ever `deleting`.
// A partial index holds only those rows, so the sweep's read stays as small as what it finds.
// Built CONCURRENTLY, outside a transaction, so adding it does not stop writes.

export const config = { transaction: false };

export async function up(knex) {
  await knex.raw(
    `CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_subscriptions_deleting_idx ON webhook_subscriptions (deleting_at) WHERE status = 'deleting'`,
  );
}

export async function down(knex) {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS webhook_subscriptions_deleting_idx');
}
