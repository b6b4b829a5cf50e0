// A recovery reads one subscription's failed deliveries in a window of failure times: one range
// of this partial index. Built CONCURRENTLY, outside a transaction, so writes never wait for it.

export const config = { transaction: false };

export async function up(knex) {
  await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_subscription_failed_idx ON deliveries (subscription_id, finished_at) WHERE status = 'failed'`);
}

export async function down(knex) {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS deliveries_subscription_failed_idx');
}
