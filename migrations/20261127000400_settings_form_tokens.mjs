// Each create form in Settings carries a single-use token, so a reload or Back/Forward that sends
// the form again creates nothing a second time. A used token is kept as long as its session.

export async function up(knex) {
  await knex.raw(`
    CREATE TABLE IF NOT EXISTS settings_used_forms (
      session_hash text NOT NULL REFERENCES settings_sessions(token_hash) ON DELETE CASCADE,
      form_token text NOT NULL,
      used_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_hash, form_token)
    )`);
}

export async function down(knex) {
  await knex.raw('DROP TABLE IF EXISTS settings_used_forms');
}
