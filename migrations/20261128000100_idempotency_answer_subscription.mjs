// A stored answer to an Idempotency-Key may be sealed with SECRETS_ENCRYPTION_KEY (it can show a
// webhook secret), so its text can no longer be searched for the subscription it is about: the
// subscription's id gets a column of its own, which a revocation deletes by. Nullable, so adding
// it rewrites nothing; the answers already stored (about a day of them) are filled in from their text.

export async function up(knex) {
  await knex.raw('ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS subscription_id text');
  await knex.raw(`
    UPDATE idempotency_keys
       SET subscription_id = substring(response_body from '^\\{"data":\\{"subscription":\\{"id":"([^"]+)"')
     WHERE subscription_id IS NULL AND response_body LIKE '{"data":{"subscription":{"id":"%'`);
}

export async function down(knex) {
  await knex.raw('ALTER TABLE idempotency_keys DROP COLUMN IF EXISTS subscription_id');
}
