// Every revocation, however it is made (svc, the Settings service, plain SQL), is announced to
// the API processes that LISTEN, so they drop a cached key at once.

export async function up(knex) {
  await knex.raw(`
    CREATE FUNCTION svc_notify_api_key_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('svc_api_key_revoked', NEW.id);
      RETURN NEW;
    END
    $$`);
  await knex.raw(`
    CREATE TRIGGER api_keys_revoked_notify
      AFTER UPDATE OF revoked_at ON api_keys
      FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
      EXECUTE FUNCTION svc_notify_api_key_revoked()`);
}

export async function down(knex) {
  await knex.raw('DROP TRIGGER api_keys_revoked_notify ON api_keys');
  await knex.raw('DROP FUNCTION svc_notify_api_key_revoked()');
}
