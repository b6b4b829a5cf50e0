// A producer call's idempotency key, given by a producer in another service so that its retry of
// a call whose outcome it could not know (the connection lost after COMMIT) records the fact and
// its event once. NULL for a call made without one: its identity is its event id, minted when the
// call is made and reused by every try (the primary key already keeps it unique). The index is
// partial, so an event without a key costs it nothing. The column is added without a default (no
// table rewrite) and the index is built CONCURRENTLY, outside a transaction, so neither stops
// producers' writes.

export const config = { transaction: false };

export async function up(knex) {
  await knex.raw('ALTER TABLE events ADD COLUMN IF NOT EXISTS idempotency_key text');
  await knex.raw('CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS events_idempotency_key_idx ON events (idempotency_key) WHERE idempotency_key IS NOT NULL');
}

export async function down(knex) {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS events_idempotency_key_idx');
  await knex.raw('ALTER TABLE events DROP COLUMN IF EXISTS idempotency_key');
}
