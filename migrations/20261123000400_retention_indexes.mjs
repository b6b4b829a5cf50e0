// What the retention purge (DELIVERY_RETENTION_DAYS) scans, oldest first, in small batches:
// finished deliveries by finish time and events by creation time. Built CONCURRENTLY, outside a
// transaction, so adding them to a years-old table does not stop writes while they build.

export const config = { transaction: false };

export async function up(knex) {
  await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_finished_idx ON deliveries (finished_at) WHERE status <> 'pending'`);
  await knex.raw('CREATE INDEX CONCURRENTLY IF NOT EXISTS events_created_idx ON events (created_at)');
}

export async function down(knex) {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS events_created_idx');
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS deliveries_finished_idx');
}
