// Redelivery (issue 10): a second delivery row of the same event to the same subscription.
// The fan-out's one-delivery-per-(event, subscription) rule now holds for first deliveries
// only; at most one delivery of an event to a subscription may be pending at a time, which
// makes a double-clicked "redeliver" store one delivery, whatever the timing. The customer's
// delivery log pages newest first on (created_at, id).

export async function up(knex) {
  await knex.raw(`ALTER TABLE deliveries ADD COLUMN redelivery_of text REFERENCES deliveries(id) ON DELETE CASCADE`);
  await knex.raw(`ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_subscription_id_unique`);
  await knex.raw(`CREATE UNIQUE INDEX deliveries_first_delivery_idx ON deliveries (event_id, subscription_id) WHERE redelivery_of IS NULL`);
  await knex.raw(`CREATE UNIQUE INDEX deliveries_one_pending_idx ON deliveries (event_id, subscription_id) WHERE status = 'pending'`);
  // Keyset paging of one subscription's log, with and without a status filter.
  await knex.raw(`CREATE INDEX deliveries_subscription_log_idx ON deliveries (subscription_id, created_at DESC, id DESC)`);
  await knex.raw(`CREATE INDEX deliveries_subscription_status_log_idx ON deliveries (subscription_id, status, created_at DESC, id DESC)`);
  await knex.raw(`DROP INDEX deliveries_subscription_idx`);
  // The foreign key's own index: deleting a delivery looks up its redeliveries.
  await knex.raw(`CREATE INDEX deliveries_redelivery_of_idx ON deliveries (redelivery_of) WHERE redelivery_of IS NOT NULL`);
}

export async function down(knex) {
  await knex.raw(`DELETE FROM deliveries WHERE redelivery_of IS NOT NULL`);
  await knex.raw(`CREATE INDEX deliveries_subscription_idx ON deliveries (subscription_id, created_at DESC)`);
  await knex.raw(`DROP INDEX deliveries_redelivery_of_idx`);
  await knex.raw(`DROP INDEX deliveries_subscription_status_log_idx`);
  await knex.raw(`DROP INDEX deliveries_subscription_log_idx`);
  await knex.raw(`DROP INDEX deliveries_one_pending_idx`);
  await knex.raw(`DROP INDEX deliveries_first_delivery_idx`);
  await knex.raw(`ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_id_subscription_id_unique UNIQUE (event_id, subscription_id)`);
  await knex.raw(`ALTER TABLE deliveries DROP COLUMN redelivery_of`);
}
