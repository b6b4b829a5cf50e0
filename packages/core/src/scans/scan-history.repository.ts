import type { DbOrTx } from '../db/knex.js';
import { hotRead, isoFromJsonUtc, jsonUtc, runHotRead, type HotRead } from '../db/hot-read.js';
import { NotFoundError } from '../errors.js';
import type { ScanTrigger } from './scan-inputs.js';
import { toScan, type Scan, type ScanRow } from './scan.repository.js';

/** Issue 9: a history page holds at most this many scans, and this many when no limit is given. */
export const SCAN_HISTORY_MAX_LIMIT = 100;

/**
 * One completed scan in a site's score history. The times are ISO 8601 strings in UTC with
 * milliseconds, as Date#toISOString writes them: a page holds 200 of them, and parsing each into a
 * Date only to format it again was a fifth of the endpoint's CPU. Postgres gives them as JSON text
 * (jsonUtc, cheaper for it than to_char) and isoFromJsonUtc completes them.
 */
export interface HistoryScan {
  id: string;
  score: number;
  status: 'completed';
  trigger: ScanTrigger;
  startedAt: string;
  completedAt: string;
}

/** Where a page starts: strictly after this scan in the history's order (latest completedAt first, ties by id). */
export interface HistoryPosition {
  completedAt: Date;
  id: string;
}

export interface HistoryQuery {
  limit: number;
  /** Only scans completed strictly after this instant. */
  since?: Date;
  after?: HistoryPosition;
}

export interface HistoryPage {
  scans: HistoryScan[];
  /** The last scan of the page when more follow it, else null. */
  next: HistoryPosition | null;
}

interface HistoryRow {
  id: string | null;
  score: number | null;
  trigger: ScanTrigger | null;
  started_at: string | null;
  completed_at: string | null;
}

/**
 * The statement for each combination of filters. Each is its own named prepared statement with
 * plain conditions, so that a generic plan still turns `since` and the cursor into index bounds:
 * a `(? IS NULL OR …)` form would become a filter, and a late page a walk from the top.
 * Exported for the test that checks the plan on a large history. Bindings, in order: since
 * (if any), the cursor's completedAt and id (if any), the row limit, the site id, the account id.
 */
export function scanHistorySql(hasSince: boolean, hasAfter: boolean): { sql: string; name: string } {
  const conditions = ["c.site_id = s.id", "c.status = 'completed'"];
  if (hasSince) conditions.push('c.completed_at > ?');
  if (hasAfter) conditions.push('(c.completed_at, c.id) < (?, ?)');
  return {
    name: `svc_scan_history_${hasSince ? 's' : ''}${hasAfter ? 'a' : ''}`,
    sql: `SELECT h.id, h.score, h.trigger, ${jsonUtc('h.started_at')} AS started_at, ${jsonUtc('h.completed_at')} AS completed_at
            FROM sites s
            LEFT JOIN LATERAL (
              SELECT c.id, c.score, c.trigger, c.started_at, c.completed_at FROM scans c
               WHERE ${conditions.join(' AND ')}
               ORDER BY c.completed_at DESC, c.id DESC
               LIMIT ?
            ) h ON true
           WHERE s.id = ? AND s.account_id = ?`,
  };
}

/** The four statements, by (since ? 2 : 0) + (after ? 1 : 0): hot reads, without knex's query runner. */
const HISTORY_READS = [false, true].flatMap((hasSince) =>
  [false, true].map((hasAfter) => {
    const { sql, name } = scanHistorySql(hasSince, hasAfter);
    return hotRead(name, sql);
  }),
);

/**
 * One page of a site's completed scans, latest completedAt first, ties by id; keyset-paged on
 * (completedAt, id), so scans completing meanwhile never shift a later page. One statement,
 * one range read of the index scans_site_history_idx. NotFoundError when the site is not the account's.
 */
export async function listScanHistory(db: DbOrTx, accountId: string, siteId: string, query: HistoryQuery): Promise<HistoryPage> {
  const read = HISTORY_READS[(query.since !== undefined ? 2 : 0) + (query.after !== undefined ? 1 : 0)] as HotRead;
  const bindings: unknown[] = [];
  if (query.since) bindings.push(query.since);
  if (query.after) bindings.push(query.after.completedAt, query.after.id);
  // One row more than the page tells whether another page follows.
  bindings.push(query.limit + 1, siteId, accountId);
  const rows = await runHotRead<HistoryRow>(db, read, bindings);
  if (rows.length === 0) throw new NotFoundError('No site with this id exists in your account.');
  const scans = rows
    .filter((row): row is { [K in keyof HistoryRow]: NonNullable<HistoryRow[K]> } => row.id !== null)
    .map((row) => ({
      id: row.id,
      score: Number(row.score),
      status: 'completed' as const,
      trigger: row.trigger,
      startedAt: isoFromJsonUtc(row.started_at),
      completedAt: isoFromJsonUtc(row.completed_at),
    }));
  if (scans.length <= query.limit) return { scans, next: null };
  const page = scans.slice(0, query.limit);
  const last = page[page.length - 1] as HistoryScan;
  return { scans: page, next: { completedAt: new Date(last.completedAt), id: last.id } };
}

/** One scan of the account, in any status; NotFoundError for another account's scan or an unknown id. */
export async function getScan(db: DbOrTx, accountId: string, scanId: string): Promise<Scan> {
  const result = await db
    .raw(
      `SELECT c.id, c.site_id, c.status, c.score, c.trigger, c.started_at, c.completed_at, c.failed_at, c.categories
         FROM scans c JOIN sites s ON s.id = c.site_id
        WHERE c.id = ? AND s.account_id = ?`,
      [scanId, accountId],
    )
    .options({ name: 'svc_scan_detail' });
  const row = result.rows[0] as ScanRow | undefined;
  if (!row) throw new NotFoundError('No scan with this id exists in your account.');
  return toScan(row);
}
