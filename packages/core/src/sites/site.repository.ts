import type { DbOrTx } from '../db/knex.js';
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

export interface LatestScan {
  id: string;
  score: number;
  status: 'completed';
  completedAt: Date;
}

export interface SiteDetail extends SiteSummary {
  latestScan: LatestScan | null;
}

interface SiteRow {
  id: string;
  domain: string;
  name: string | null;
  status: SiteStatus;
  created_at: Date;
}

const SUMMARY_COLUMNS = ['id', 'domain', 'name', 'status', 'created_at'] as const;

function toSummary(row: SiteRow): SiteSummary {
  return { id: row.id, domain: row.domain, name: row.name, status: row.status, createdAt: row.created_at };
}

/** Adds a site to an account, normalizing its domain; a domain is listed once per account. */
export async function createSite(
  db: DbOrTx,
  accountId: string,
  input: { domain: string; name?: string | null; status?: string },
): Promise<SiteSummary> {
  const status = input.status ?? 'active';
  if (!SITE_STATUSES.includes(status as SiteStatus)) {
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
  return toSummary(row as SiteRow);
}

const LIST_SITES_JSON = hotRead(
  'svc_list_sites_json',
  // Served by sites_account_created_idx in order: only `limit` index entries are read, never
  // sorted by the scan (the aggregate's ORDER BY sorts the ≤ 100 rows it is given, which is what
  // guarantees the order). Each site is written as the API lists it (spec §4.1: id, domain, name,
  // status, createdAt; to_json escapes as JSON.stringify does; a site without a name is null).
  `SELECT '[' || COALESCE(string_agg(json, ',' ORDER BY created_at DESC, id DESC), '') || ']' AS json
     FROM (SELECT created_at, id,
                  '{"id":' || to_json(id)::text || ',"domain":' || to_json(domain)::text
                  || ',"name":' || COALESCE(to_json(name)::text, 'null') || ',"status":' || to_json(status)::text
                  || ',"createdAt":"' || ${isoUtc('created_at')} || '"}' AS json
             FROM sites
            WHERE account_id = ?
            ORDER BY created_at DESC, id DESC
            LIMIT ?) AS listed`,
);

/**
 * The newest sites of one account, most recently added first (spec §4.1), as the text of the
 * JSON array the API lists: Postgres writes each site (as for the detail and the webhooks list,
 * ADR 12) and joins them into one row, so the API neither parses five columns per row into
 * objects only to stringify them again nor receives and joins a row per site (bench case 1: the
 * list's API process spent 0.66 ms per request against 0.60 for the detail, ADR 12).
 */
export async function listSitesAsJsonArray(db: DbOrTx, accountId: string, limit = SITES_LIST_LIMIT): Promise<string> {
  const [row] = await runHotRead<{ json: string }>(db, LIST_SITES_JSON, [accountId, limit]);
  return row!.json;
}

/** The newest sites of one account, most recently added first (spec §4.1), as objects. */
export async function listSites(db: DbOrTx, accountId: string, limit = SITES_LIST_LIMIT): Promise<SiteSummary[]> {
  const listed = JSON.parse(await listSitesAsJsonArray(db, accountId, limit)) as Array<Omit<SiteSummary, 'createdAt'> & { createdAt: string }>;
  return listed.map((site) => ({ ...site, createdAt: new Date(site.createdAt) }));
}

const SITE_DETAIL = hotRead(
  'svc_site_detail',
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
);

interface SiteDetailRow extends SiteRow {
  scan_id: string | null;
  scan_score: number | null;
  scan_completed_at: Date | null;
}

/** One site of one account with its latest completed scan; NotFoundError for any other id. */
export async function getSiteDetail(db: DbOrTx, accountId: string, siteId: string): Promise<SiteDetail> {
  const [row] = await runHotRead<SiteDetailRow>(db, SITE_DETAIL, [siteId, accountId]);
  if (!row) throw new NotFoundError('No site with this id exists in your account.');
  const latestScan: LatestScan | null =
    row.scan_id === null
      ? null
      : { id: row.scan_id, score: Number(row.scan_score), status: 'completed', completedAt: row.scan_completed_at as Date };
  return { ...toSummary(row), latestScan };
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
 * other id. The same values as getSiteDetail, with one difference of form only: a score in
 * exponent form is written as Postgres writes floats (1e-07 where JSON.stringify writes 1e-7,
 * 1e+15 where it writes 1000000000000000, -0 where it writes 0): the same JSON numbers.
 */
export async function getSiteDetailAsJson(db: DbOrTx, accountId: string, siteId: string): Promise<string> {
  const [row] = await runHotRead<{ site_json: string }>(db, SITE_DETAIL_JSON, [siteId, accountId]);
  if (!row) throw new NotFoundError('No site with this id exists in your account.');
  return row.site_json;
}

/** The site with its account, for producers and operators that start from a site id. */
export async function findSiteById(db: DbOrTx, siteId: string): Promise<(SiteSummary & { accountId: string }) | undefined> {
  const row = await db('sites').where({ id: siteId }).first([...SUMMARY_COLUMNS, 'account_id']);
  return row ? { ...toSummary(row as SiteRow), accountId: row.account_id } : undefined;
}
