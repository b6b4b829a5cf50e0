// Issue 9: what the read API shows beyond spec §2: a scan's trigger and per-category breakdown,
// an AI Monitor run's per-engine breakdown, and the indexes the score history and the latest
// run are read from.

export async function up(knex) {
  await knex.raw(`ALTER TABLE scans
    ADD COLUMN trigger text NOT NULL DEFAULT 'manual',
    ADD COLUMN categories jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD CONSTRAINT scans_trigger_check CHECK (trigger IN ('scheduled', 'manual')),
    ADD CONSTRAINT scans_categories_array_check CHECK (jsonb_typeof(categories) = 'array')`);
  await knex.raw(`ALTER TABLE ai_monitor_runs
    ADD COLUMN engines jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD CONSTRAINT ai_monitor_runs_engines_array_check CHECK (jsonb_typeof(engines) = 'array')`);

  // The history page (GET /sites/{id}/scans) and latestScan, in one index: the keyset order of
  // completed scans, carrying every column a history row shows so a page is an index-only
  // range read and never a sort of the history. It replaces the narrower index of the same order.
  await knex.raw(`CREATE INDEX scans_site_history_idx ON scans (site_id, completed_at DESC, id DESC)
    INCLUDE (score, trigger, started_at) WHERE status = 'completed'`);
  await knex.raw('DROP INDEX scans_site_completed_idx');

  // The latest run with the same tie-break as the history (id), so `ORDER BY completed_at DESC,
  // id DESC LIMIT 1` is one index probe.
  await knex.raw('CREATE INDEX ai_monitor_runs_site_latest_idx ON ai_monitor_runs (site_id, completed_at DESC, id DESC)');
  await knex.raw('DROP INDEX ai_monitor_runs_site_idx');
}

export async function down(knex) {
  await knex.raw('CREATE INDEX ai_monitor_runs_site_idx ON ai_monitor_runs (site_id, completed_at DESC)');
  await knex.raw('DROP INDEX ai_monitor_runs_site_latest_idx');
  await knex.raw(
    `CREATE INDEX scans_site_completed_idx ON scans (site_id, completed_at DESC, id DESC) WHERE status = 'completed'`,
  );
  await knex.raw('DROP INDEX scans_site_history_idx');
  await knex.raw(`ALTER TABLE ai_monitor_runs DROP CONSTRAINT ai_monitor_runs_engines_array_check, DROP COLUMN engines`);
  await knex.raw(`ALTER TABLE scans DROP CONSTRAINT scans_categories_array_check, DROP CONSTRAINT scans_trigger_check,
    DROP COLUMN categories, DROP COLUMN trigger`);
}
