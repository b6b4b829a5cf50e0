// Issue 13: a claim changes only `locked_until` and `claims`, columns no index holds. With free
// room on the row's page Postgres writes the new row version there as a HOT update, touching none
// of the table's seven indexes; with the default fillfactor (100) a freshly filled page has no
// room, and every claim inserted seven index entries. Pages written from now on keep 30% free.
// Same for subscriptions, whose `last_delivery_at` / `failure_count` move on every delivered record.

export async function up(knex) {
  await knex.raw('ALTER TABLE deliveries SET (fillfactor = 70)');
  await knex.raw('ALTER TABLE webhook_subscriptions SET (fillfactor = 70)');
}

export async function down(knex) {
  await knex.raw('ALTER TABLE deliveries RESET (fillfactor)');
  await knex.raw('ALTER TABLE webhook_subscriptions RESET (fillfactor)');
}
