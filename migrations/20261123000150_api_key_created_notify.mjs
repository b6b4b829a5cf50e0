// Every new key, however it is made (svc, the Settings service, plain SQL), is announced to the
// API processes that LISTEN, so they forget at once that its hash was unknown (the negative
// cache of apps/api/src/auth/unknown-key-cache.ts never hides a new key while they listen).

export async function up(knex) {
  await knex.raw(`
    CREATE FUNCTION svc_notify_api_key_created() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('svc_api_key_created', NEW.id);
      RETURN NEW;
    END
    $$`);
  await knex.raw(`
    CREATE TRIGGER api_keys_created_notify
      AFTER INSERT ON api_keys
      FOR EACH ROW EXECUTE FUNCTION svc_notify_api_key_created()`);
}

export async function down(knex) {
  await knex.raw('DROP TRIGGER api_keys_created_notify ON api_keys');
  await knex.raw('DROP FUNCTION svc_notify_api_key_created()');
}
