import type { DbOrTx } from '../db/knex.js';
import { NotFoundError } from '../errors.js';
import type { EngineScore } from './engine-scores.js';

export interface AiMonitorRun {
  id: string;
  siteId: string;
  compositeScore: number;
  completedAt: Date;
  /** The per-engine breakdown; `[]` when none was reported. */
  engines: EngineScore[];
}

/** An `ai_monitor_runs` row as Postgres returns it. */
export interface AiMonitorRunRow {
  id: string;
  site_id: string;
  composite_score: number | string;
  completed_at: Date;
  engines: EngineScore[];
}

export function toAiMonitorRun(row: AiMonitorRunRow): AiMonitorRun {
  return { id: row.id, siteId: row.site_id, compositeScore: Number(row.composite_score), completedAt: row.completed_at, engines: row.engines };
}

/**
 * The latest completed run of one site of one account (latest `completedAt`, ties by id), or null
 * when none has completed; NotFoundError when the site is not the account's. One statement.
 */
export async function getLatestAiMonitorRun(db: DbOrTx, accountId: string, siteId: string): Promise<AiMonitorRun | null> {
  const result = await db
    .raw(
      `SELECT s.id AS site_id, r.id, r.composite_score, r.completed_at, r.engines
         FROM sites s
         LEFT JOIN LATERAL (
           SELECT id, composite_score, completed_at, engines FROM ai_monitor_runs
            WHERE site_id = s.id
            ORDER BY completed_at DESC, id DESC
            LIMIT 1
         ) r ON true
        WHERE s.id = ? AND s.account_id = ?`,
      [siteId, accountId],
    )
    .options({ name: 'svc_latest_ai_run' });
  const row = result.rows[0] as (Omit<AiMonitorRunRow, 'id'> & { id: string | null }) | undefined;
  if (!row) throw new NotFoundError('No site with this id exists in your account.');
  return row.id === null ? null : toAiMonitorRun(row as AiMonitorRunRow);
}
