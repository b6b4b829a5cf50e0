// Accounts, sites, scans, API keys and webhook subscriptions: everything the v1 API reads.

export async function up(knex) {
  await knex.schema.createTable('accounts', (t) => {
    t.text('id').primary();
    t.text('name').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
  });

  await knex.schema.createTable('sites', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('domain').notNullable();
    t.text('name');
    t.text('status').notNullable().defaultTo('active');
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
    t.unique(['account_id', 'domain']);
  });
  await knex.raw(`ALTER TABLE sites ADD CONSTRAINT sites_status_check CHECK (status IN ('active', 'inactive', 'prospect'))`);
  // The list endpoint: newest 100 of one account, served from the index without a sort.
  await knex.raw('CREATE INDEX sites_account_created_idx ON sites (account_id, created_at DESC, id DESC)');

  await knex.schema.createTable('scans', (t) => {
    t.text('id').primary();
    t.text('site_id').notNullable().references('sites.id').onDelete('CASCADE');
    t.text('status').notNullable().defaultTo('running');
    t.double('score');
    t.timestamp('started_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
    t.timestamp('completed_at', { useTz: true, precision: 3 });
    t.timestamp('failed_at', { useTz: true, precision: 3 });
  });
  await knex.raw(`ALTER TABLE scans ADD CONSTRAINT scans_status_check CHECK (
    (status = 'running' AND score IS NULL AND completed_at IS NULL AND failed_at IS NULL) OR
    (status = 'completed' AND score IS NOT NULL AND completed_at IS NOT NULL AND failed_at IS NULL) OR
    (status = 'failed' AND completed_at IS NULL AND failed_at IS NOT NULL))`);
  // latestScan: the newest completed scan of a site, one index probe.
  await knex.raw(
    `CREATE INDEX scans_site_completed_idx ON scans (site_id, completed_at DESC, id DESC) WHERE status = 'completed'`,
  );

  await knex.schema.createTable('api_keys', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('key_hash').notNullable().unique();
    t.text('prefix').notNullable();
    t.text('scopes').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
    t.timestamp('last_used_at', { useTz: true, precision: 3 });
    t.timestamp('revoked_at', { useTz: true, precision: 3 });
  });
  await knex.raw('CREATE INDEX api_keys_account_idx ON api_keys (account_id, created_at DESC)');

  await knex.schema.createTable('webhook_subscriptions', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('url').notNullable();
    t.specificType('events', 'text[]').notNullable();
    t.text('secret').notNullable();
    t.text('status').notNullable().defaultTo('active');
    t.integer('failure_count').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now(3));
    t.timestamp('last_delivery_at', { useTz: true, precision: 3 });
    t.timestamp('disabled_at', { useTz: true, precision: 3 });
    // Set when a revocation starts; the row is gone once it ends.
    t.timestamp('deleting_at', { useTz: true, precision: 3 });
  });
  await knex.raw(
    `ALTER TABLE webhook_subscriptions ADD CONSTRAINT webhook_subscriptions_status_check CHECK (status IN ('active', 'disabled', 'deleting'))`,
  );
  await knex.raw('CREATE INDEX webhook_subscriptions_account_idx ON webhook_subscriptions (account_id, created_at DESC, id DESC)');
}

export async function down(knex) {
  await knex.schema.dropTable('webhook_subscriptions');
  await knex.schema.dropTable('api_keys');
  await knex.schema.dropTable('scans');
  await knex.schema.dropTable('sites');
  await knex.schema.dropTable('accounts');
}
