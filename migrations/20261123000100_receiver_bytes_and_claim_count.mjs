// Issue 8: what a receiver answers is kept as bytes (a NUL or invalid UTF-8 cannot go into
// `text`, and a failed record used to make the same attempt repeat forever), and every claim of
// an attempt is counted so an attempt that never gets an outcome cannot be sent without end.

export async function up(knex) {
  await knex.schema.alterTable('delivery_attempts', (t) => {
    // The receiver's first bytes, exactly. `response_excerpt` keeps a display text of them
    // (invalid UTF-8 and NUL as U+FFFD) for readers of older rows and older code.
    t.binary('response_excerpt_bytes');
  });
  await knex.schema.alterTable('deliveries', (t) => {
    // Claims of the current attempt (reset when the attempt number moves on): bounded by the
    // dispatcher's claim limit, after which the delivery is failed instead of sent again.
    t.integer('claims').notNullable().defaultTo(0);
  });
}

export async function down(knex) {
  await knex.schema.alterTable('deliveries', (t) => {
    t.dropColumn('claims');
  });
  await knex.schema.alterTable('delivery_attempts', (t) => {
    t.dropColumn('response_excerpt_bytes');
  });
}
