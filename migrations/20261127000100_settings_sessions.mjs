// The account owner's Settings: single-use sign-in links issued by the main product (or `svc
// portal link`), and the browser sessions they open. Only SHA-256 hashes of the link tokens and
// session tokens are stored, as for API keys. Both tables are new and empty, so nothing waits.

export async function up(knex) {
  await knex.raw(`
    CREATE TABLE settings_links (
      token_hash text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      used_at timestamptz
    )`);
  await knex.raw('CREATE INDEX settings_links_expires_idx ON settings_links (expires_at)');
  await knex.raw(`
    CREATE TABLE settings_sessions (
      token_hash text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_seen_at timestamptz NOT NULL DEFAULT now(),
      ended_at timestamptz
    )`);
  await knex.raw('CREATE INDEX settings_sessions_created_idx ON settings_sessions (created_at)');
}

export async function down(knex) {
  await knex.raw('DROP TABLE IF EXISTS settings_sessions');
  await knex.raw('DROP TABLE IF EXISTS settings_links');
}
