// The record of every event and every delivery: Redis only schedules, Postgres remembers.

export async function up(knex) {
  await knex.schema.createTable('ai_monitor_runs', (t) => {
    t.text('id').primary();
    t.text('site_id').notNullable().references('sites.id').onDelete('CASCADE');
    t.double('composite_score').notNullable();
    t.timestamp('completed_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
  });
  await knex.raw('CREATE INDEX ai_monitor_runs_site_idx ON ai_monitor_runs (site_id, completed_at DESC)');

  await knex.schema.createTable('power_up_deployments', (t) => {
    t.text('id').primary();
    t.text('site_id').notNullable().references('sites.id').onDelete('CASCADE');
    t.text('power_up_id').notNullable();
    t.timestamp('deployed_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
  });
  await knex.raw('CREATE INDEX power_up_deployments_site_idx ON power_up_deployments (site_id, deployed_at DESC)');

  await knex.schema.createTable('events', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('type').notNullable();
    // The exact bytes every attempt of every subscription signs and sends.
    t.text('body').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
    t.timestamp('fanned_out_at', { useTz: true, precision: 3 });
  });
  await knex.raw('CREATE INDEX events_unfanned_idx ON events (created_at) WHERE fanned_out_at IS NULL');

  await knex.schema.createTable('deliveries', (t) => {
    t.text('id').primary();
    t.text('event_id').notNullable().references('events.id').onDelete('CASCADE');
    t.text('subscription_id').notNullable().references('webhook_subscriptions.id').onDelete('CASCADE');
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempt_count').notNullable().defaultTo(0);
    t.timestamp('next_attempt_at', { useTz: true, precision: 3 });
    // Set while an attempt is on the wire: no second sender, and DELETE waits for it.
    t.timestamp('locked_until', { useTz: true, precision: 3 });
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
    t.timestamp('finished_at', { useTz: true, precision: 3 });
    t.text('failure_reason');
    t.unique(['event_id', 'subscription_id']);
  });
  await knex.raw(`ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN ('pending', 'delivered', 'failed'))`);
  await knex.raw(`CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending'`);
  await knex.raw('CREATE INDEX deliveries_subscription_idx ON deliveries (subscription_id, created_at DESC)');

  await knex.schema.createTable('delivery_attempts', (t) => {
    t.bigIncrements('id').primary();
    t.text('delivery_id').notNullable().references('deliveries.id').onDelete('CASCADE');
    t.integer('n').notNullable();
    t.timestamp('at', { useTz: true, precision: 3 }).notNullable();
    t.integer('status_code');
    t.text('error');
    t.integer('duration_ms').notNullable();
    t.text('response_excerpt');
    t.unique(['delivery_id', 'n']);
  });
}

export async function down(knex) {
  await knex.schema.dropTable('delivery_attempts');
  await knex.schema.dropTable('deliveries');
  await knex.schema.dropTable('events');
  await knex.schema.dropTable('power_up_deployments');
  await knex.schema.dropTable('ai_monitor_runs');
}
