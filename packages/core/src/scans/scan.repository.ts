import type { DbOrTx } from '../db/knex.js';
import { returnedRow } from '../db/tables.js';
import { ConflictError, InputError, NotFoundError } from '../errors.js';
import { newId } from '../ids.js';
import { parseScanCategories, parseScanTrigger, type ScanCategory, type ScanTrigger } from './scan-inputs.js';

export type ScanStatus = 'running' | 'completed' | 'failed';

export interface Scan {
  id: string;
  siteId: string;
  status: ScanStatus;
  score: number | null;
  trigger: ScanTrigger;
  startedAt: Date;
  completedAt: Date | null;
  failedAt: Date | null;
  /** The per-category breakdown given at completion; `[]` when none was. */
  categories: ScanCategory[];
}

/** A `scans` row as Postgres returns it (declared to knex in db/tables.ts). */
export interface ScanRow {
  id: string;
  site_id: string;
  status: ScanStatus;
  score: number | null;
  trigger: ScanTrigger;
  started_at: Date;
  completed_at: Date | null;
  failed_at: Date | null;
  categories: ScanCategory[];
}

export function toScan(row: ScanRow): Scan {
  return {
    id: row.id,
    siteId: row.site_id,
    status: row.status,
    score: row.score === null ? null : Number(row.score),
    trigger: row.trigger,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    failedAt: row.failed_at,
    categories: row.categories,
  };
}

/** Checks that a score is a finite number; scores are stored and sent as numbers. */
export function assertScore(score: unknown, label = 'score'): number {
  if (typeof score !== 'number' || !Number.isFinite(score)) throw new InputError(`${label} must be a finite number`);
  return score;
}

/**
 * Starts a scan of a site: a running scan never counts as the latest scan. `trigger` says who
 * started it (`manual` unless given); a bad one is refused before anything is written.
 */
export async function startScan(db: DbOrTx, siteId: string, input: { trigger?: unknown } = {}): Promise<Scan> {
  const trigger = parseScanTrigger(input.trigger);
  const site = await db('sites').where({ id: siteId }).first('id');
  if (!site) throw new NotFoundError(`site ${siteId} does not exist`);
  const row = returnedRow(await db('scans').insert({ id: newId('scan'), site_id: siteId, status: 'running', trigger }).returning('*'));
  return toScan(row);
}

/**
 * Moves a running scan to completed with its score and optional per-category breakdown; refuses
 * any other state so a scan completes once.
 */
export async function markScanCompleted(db: DbOrTx, scanId: string, score: number, categories?: unknown): Promise<Scan> {
  assertScore(score);
  const breakdown = parseScanCategories(categories);
  const [row] = await db('scans')
    .where({ id: scanId, status: 'running' })
    .update({ status: 'completed', score, completed_at: db.fn.now(3), categories: JSON.stringify(breakdown) })
    .returning('*');
  if (!row) throw await explainNotRunning(db, scanId);
  return toScan(row);
}

/** Moves a running scan to failed; a failed scan fires nothing and is never the latest scan. */
export async function markScanFailed(db: DbOrTx, scanId: string): Promise<Scan> {
  const [row] = await db('scans')
    .where({ id: scanId, status: 'running' })
    .update({ status: 'failed', failed_at: db.fn.now(3) })
    .returning('*');
  if (!row) throw await explainNotRunning(db, scanId);
  return toScan(row);
}

/** Why a scan did not move from running: it does not exist, or it is in another state. */
export async function explainNotRunning(db: DbOrTx, scanId: string): Promise<Error> {
  const existing = await db('scans').where({ id: scanId }).first('status');
  if (!existing) return new NotFoundError(`scan ${scanId} does not exist`);
  return new ConflictError(`scan ${scanId} is ${existing.status as string}, not running`);
}
