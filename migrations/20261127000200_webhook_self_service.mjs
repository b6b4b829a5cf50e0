// Webhook self-service: a rotated secret keeps signing beside the new one until its overlap ends,
// and a POST or PATCH with an Idempotency-Key is answered once and replayed for 24 hours. Both
// changes are additive: two nullable columns (no table rewrite) and a new table.

export async function up(knex) {
  await knex.raw('ALTER TABLE webhook_subscriptions ADD COLUMN IF NOT EXISTS previous_secret text');
  await knex.raw('ALTER TABLE webhook_subscriptions ADD COLUMN IF NOT EXISTS previous_secret_expires_at timestamptz');
  await knex.raw(`
    CREATE TABLE IF NOT EXISTS idempotency_keys (
      account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
      key text NOT NULL,
      fingerprint text NOT NULL,
      state text NOT NULL CHECK (state IN ('in_progress', 'done')),
      locked_until timestamptz,
      response_status int,
      response_body text,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_id, key)
    )`);
  await knex.raw('CREATE INDEX IF NOT EXISTS idempotency_keys_created_idx ON idempotency_keys (created_at)');
}

export async function down(knex) {
  await knex.raw('DROP TABLE IF EXISTS idempotency_keys');
  await knex.raw('ALTER TABLE webhook_subscriptions DROP COLUMN IF EXISTS previous_secret_expires_at');
  await knex.raw('ALTER TABLE webhook_subscriptions DROP COLUMN IF EXISTS previous_secret');
}
