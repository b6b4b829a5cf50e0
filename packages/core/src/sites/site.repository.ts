import type { DbOrTx } from '../db/knex.js';
import type { SiteRow } from '../db/tables.js';
import { InputError, NotFoundError } from '../errors.js';
import { newId } from '../ids.js';
import { normalizeDomain } from './domain.js';

export const SITE_STATUSES = ['active', 'inactive', 'prospect'] as const;
export type SiteStatus = (typeof SITE_STATUSES)[number];

/** Spec §4.1: at most this many sites in the list. */
export const SITES_LIST_LIMIT = 100;

export interface SiteSummary {
  id: string;
  domain: string;
  name: string | null;
  status: SiteStatus;
  createdAt: Date;
}

export interface LatestScan {
  id: string;
  score: number;
  status: 'completed';
  completedAt: Date;
}

export interface SiteDetail extends SiteSummary {
  latestScan: LatestScan | null;
}

type SiteSummaryRow = Pick<SiteRow, (typeof SUMMARY_COLUMNS)[number]>;

const SUMMARY_COLUMNS = ['id', 'domain', 'name', 'status', 'created_at'] as const;

function toSummary(row: SiteSummaryRow): SiteSummary {
  return { id: row.id, domain: row.domain, name: row.name, status: row.status, createdAt: row.created_at };
}

/** Adds a site to an account, normalizing its domain; a domain is listed once per account. */
export async function createSite(
  db: DbOrTx,
  accountId: string,
  input: { domain: string; name?: string | null; status?: string },
): Promise<SiteSummary> {
  const status = (input.status ?? 'active') as SiteStatus;
  if (!SITE_STATUSES.includes(status)) {
    throw new InputError(`status must be one of ${SITE_STATUSES.join(', ')}`);
  }
  const domain = normalizeDomain(input.domain);
  const name = input.name?.trim() ? input.name.trim() : null;
  const account = await db('accounts').where({ id: accountId }).first('id');
  if (!account) throw new NotFoundError(`account ${accountId} does not exist`);
  const [row] = await db('sites')
    .insert({ id: newId('site'), account_id: accountId, domain, name, status })
    .onConflict(['account_id', 'domain'])
    .ignore()
    .returning([...SUMMARY_COLUMNS]);
  if (!row) throw new InputError(`the account already has a site with domain ${domain}`);
  return toSummary(row);
}

/** The newest sites of one account, most recently added first (spec §4.1): an ordered read of sites_account_created_idx. */
export async function listSites(db: DbOrTx, accountId: string, limit = SITES_LIST_LIMIT): Promise<SiteSummary[]> {
  const rows = await db('sites')
    .where({ account_id: accountId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(limit)
    .select(...SUMMARY_COLUMNS);
  return rows.map(toSummary);
}

interface SiteDetailRow extends SiteSummaryRow {
  scan_id: string | null;
  scan_score: number | null;
  scan_completed_at: Date | null;
}

/**
 * One site of one account with its latest completed scan (one probe of scans_site_history_idx);
 * NotFoundError for any other id.
 */
export async function getSiteDetail(db: DbOrTx, accountId: string, siteId: string): Promise<SiteDetail> {
  const result = await db
    .raw(
      `SELECT s.id, s.domain, s.name, s.status, s.created_at,
              l.id AS scan_id, l.score AS scan_score, l.completed_at AS scan_completed_at
         FROM sites s
         LEFT JOIN LATERAL (
           SELECT c.id, c.score, c.completed_at FROM scans c
            WHERE c.site_id = s.id AND c.status = 'completed'
            ORDER BY c.completed_at DESC, c.id DESC
            LIMIT 1
         ) l ON true
        WHERE s.id = ? AND s.account_id = ?`,
      [siteId, accountId],
    )
    .options({ name: 'svc_site_detail' });
  const row = (result.rows as SiteDetailRow[])[0];
  if (!row) throw new NotFoundError('No site with this id exists in your account.');
  const latestScan: LatestScan | null =
    row.scan_id === null || row.scan_completed_at === null
      ? null
      : { id: row.scan_id, score: Number(row.scan_score), status: 'completed', completedAt: row.scan_completed_at };
  return { ...toSummary(row), latestScan };
}
