import type { DbOrTx } from '../db/knex.js';
import { newId } from '../ids.js';

export interface AiMonitorRun {
  id: string;
  siteId: string;
  compositeScore: number;
  completedAt: Date;
}

interface AiMonitorRunRow {
  id: string;
  site_id: string;
  composite_score: number | string;
  completed_at: Date;
}

function toAiMonitorRun(row: AiMonitorRunRow): AiMonitorRun {
  return { id: row.id, siteId: row.site_id, compositeScore: Number(row.composite_score), completedAt: row.completed_at };
}

/** Stores a completed AI Monitor run of a site; call it inside the producer's transaction. */
export async function insertAiMonitorRun(tx: DbOrTx, siteId: string, compositeScore: number): Promise<AiMonitorRun> {
  const [row] = await tx('ai_monitor_runs')
    .insert({ id: newId('run'), site_id: siteId, composite_score: compositeScore })
    .returning(['id', 'site_id', 'composite_score', 'completed_at']);
  return toAiMonitorRun(row as AiMonitorRunRow);
}
