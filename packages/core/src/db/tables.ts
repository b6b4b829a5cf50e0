import type { Knex } from 'knex';
import type { AiMonitorRunRow } from '../ai-monitor/ai-run.repository.js';
import type { ScanRow } from '../scans/scan.repository.js';

/**
 * The rows of the tables the API reads, as Postgres returns them (snake_case; timestamptz as
 * Date, double precision as number, text[] and jsonb parsed). Declared to knex below, so a
 * repository's query on these tables is typed by its columns instead of cast to a hand-written
 * shape. Only core's own sources see the declaration: no exported type refers to this module,
 * so tests and apps that write rows of their own keep knex's untyped tables.
 */
export interface AccountRow {
  id: string;
  name: string;
  created_at: Date;
}

export interface SiteRow {
  id: string;
  account_id: string;
  domain: string;
  name: string | null;
  status: 'active' | 'inactive' | 'prospect';
  created_at: Date;
}

export interface ApiKeyRow {
  id: string;
  account_id: string;
  name: string;
  key_hash: string;
  prefix: string;
  /** Space-separated scopes (parseScopes). */
  scopes: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface WebhookSubscriptionRow {
  id: string;
  account_id: string;
  url: string;
  events: string[];
  secret: string;
  /** The secret a rotation replaced, signing beside `secret` until previous_secret_expires_at. */
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  status: 'active' | 'disabled' | 'deleting';
  failure_count: number;
  created_at: Date;
  last_delivery_at: Date | null;
  disabled_at: Date | null;
  deleting_at: Date | null;
}

/** What an insert or update may give: any column, a raw expression for any, JSON text for jsonb ones. */
type Writable<Row, Json extends keyof Row> = { [K in keyof Row]?: (K extends Json ? string : Row[K]) | Knex.Raw };

declare module 'knex/types/tables.js' {
  interface Tables {
    accounts: AccountRow;
    sites: SiteRow;
    scans: Knex.CompositeTableType<ScanRow, Writable<ScanRow, 'categories'>, Writable<ScanRow, 'categories'>>;
    api_keys: ApiKeyRow;
    webhook_subscriptions: WebhookSubscriptionRow;
    ai_monitor_runs: Knex.CompositeTableType<AiMonitorRunRow, Writable<AiMonitorRunRow, 'engines'>, Writable<AiMonitorRunRow, 'engines'>>;
  }
}

/** The row an INSERT or UPDATE … RETURNING of one row gave back; its absence is a bug, not a case. */
export function returnedRow<Row>(rows: Row[]): Row {
  const [row] = rows;
  if (row === undefined) throw new Error('the statement returned no row');
  return row;
}
