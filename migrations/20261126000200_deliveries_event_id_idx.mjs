// Deliveries by event_id alone. Since 20261123000300 the only indexes leading with event_id are
// partial (first deliveries; pending ones), which cannot answer "does this event have any
// delivery left": the retention purge's events statement read the whole deliveries table on every
// batch, and deleting an event made PostgreSQL's ON DELETE CASCADE read it again for each event.
//
// Built CONCURRENTLY, outside a transaction (config.transaction = false): a plain CREATE INDEX
// would block every write to deliveries (fan-out, claims, records) for as long as the build of a
// production-sized table takes. A concurrent build that fails (a deadlock, a cancel) leaves an
// INVALID index of this name, which IF NOT EXISTS would then keep; it is dropped and built again.

export const config = { transaction: false };

const NAME = 'deliveries_event_id_idx';

export async function up(knex) {
  const { rows } = await knex.raw(
    `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace`,
    [NAME],
  );
  if (rows.length > 0 && !rows[0].valid) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${NAME}`);
  await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${NAME} ON deliveries (event_id)`);
}

export async function down(knex) {
  await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${NAME}`);
}
