import type { DbOrTx } from '../db/knex.js';
import type { SiteRow } from '../db/tables.js';
import { InputError, NotFoundError } from '../errors.js';
import { hotRead, isoUtc, runHotRead } from '../db/hot-read.js';
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

const LIST_SITES_JSON = hotRead(
  'svc_list_sites_json',
  // An ordered walk of sites_account_created_idx reading `limit` entries; the aggregate's ORDER BY
  // is what guarantees the order. Each site is the API's object (spec §4.1), as for the detail.
  `SELECT '[' || COALESCE(string_agg(site.json, ',' ORDER BY s.created_at DESC, s.id DESC), '') || ']' AS json
     FROM (SELECT * FROM sites WHERE account_id = ? ORDER BY created_at DESC, id DESC LIMIT ?) s
     CROSS JOIN LATERAL (SELECT row_to_json(r)::text AS json
                           FROM (SELECT s.id, s.domain, s.name, s.status, ${isoUtc('s.created_at')} AS "createdAt") r) site`,
);

/**
 * The newest sites of one account, most recently added first (spec §4.1), as the text of the
 * JSON array the API lists, written by Postgres (ADR 12).
 */
export async function listSitesAsJsonArray(db: DbOrTx, accountId: string, limit = SITES_LIST_LIMIT): Promise<string> {
  const [row] = await runHotRead<{ json: string }>(db, LIST_SITES_JSON, [accountId, limit]);
  return row!.json;
}

const SITE_DETAIL_JSON = hotRead(
  'svc_site_detail_json',
  // The API's site object (spec §4.2), keys in its order, written by Postgres: row_to_json writes
  // compact JSON with JSON.stringify's escapes, so the API sends this text as it is instead of
  // parsing eight columns and two timestamps into objects only to stringify them again. The
  // latest completed scan is one probe of scans_site_history_idx (its first entry for the site).
  `SELECT row_to_json(d)::text AS site_json FROM (
     SELECT s.id, s.domain, s.name, s.status, ${isoUtc('s.created_at')} AS "createdAt",
            (SELECT row_to_json(l) FROM (
               SELECT c.id, c.score, 'completed'::text AS status, ${isoUtc('c.completed_at')} AS "completedAt"
                 FROM scans c
                WHERE c.site_id = s.id AND c.status = 'completed'
                ORDER BY c.completed_at DESC, c.id DESC
                LIMIT 1
             ) l) AS "latestScan"
       FROM sites s
      WHERE s.id = ? AND s.account_id = ?
   ) d`,
);

/**
 * One site of one account with its latest completed scan, as the JSON text of the API's site
 * object (times as ISO 8601 text, latestScan null when no scan completed); NotFoundError for any
 * other id. A score in exponent form is written as Postgres writes floats (1e-07 where JSON.stringify writes 1e-7,
 * 1e+15 where it writes 1000000000000000, -0 where it writes 0): the same JSON numbers.
 */
export async function getSiteDetailAsJson(db: DbOrTx, accountId: string, siteId: string): Promise<string> {
  const [row] = await runHotRead<{ site_json: string }>(db, SITE_DETAIL_JSON, [siteId, accountId]);
  if (!row) throw new NotFoundError('No site with this id exists in your account.');
  return row.site_json;
}
